// compute-sanitizer racecheck of the slab kernel alone (cusync/sm90/slab_chain.cuh): racecheck cannot run the
// project bench (it fails inside the bench's cuBLAS peers), so this driver launches only the slab kernel, three
// runs (epochs 0..2) at M = 1 and 3, each gate kind, each layout of W1 and W2, small shapes. Exit 0 if every run completed without a timeout.
//   nvcc -std=c++17 -O2 -arch=sm_90a -Itemplates/runtime/include -Itemplates/sm90/include \
//        scripts/decode_probe/slab_race.cu -o build/slab/slab_race
#include <cstdio>
#include <vector>

#include "cusync/sm90/slab_chain.cuh"

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int const k1 = 1024, hidden = 512, n2 = 1024;
  auto const& kernels = cusync::sm90::slab_kernels<__half>();
  if (kernels.prepare() != cusync::Status::kSuccess) return 2;
  std::vector<__half> host(size_t(k1) * 2 * hidden + size_t(hidden) * n2 + 8 * size_t(k1));
  for (size_t i = 0; i < host.size(); ++i) host[i] = __float2half(float(int(i * 2654435761u % 17) - 8) / 64.f);
  __half *w1, *w2, *x, *h, *raw, *y;
  float* ws;
  uint64_t* posts;
  void* state;
  cusync::SyncErrorInfo* error;
  cudaMalloc(&w1, size_t(k1) * 2 * hidden * 2);
  cudaMalloc(&w2, size_t(hidden) * n2 * 2);
  cudaMalloc(&x, size_t(4) * k1 * 2);
  cudaMalloc(&h, size_t(4) * hidden * 2);
  cudaMalloc(&raw, size_t(4) * 2 * hidden * 2);
  cudaMalloc(&y, size_t(4) * n2 * 2);
  cudaMalloc(&ws, size_t(sms) * cusync::sm90::kSlabMaxM * n2 * 4);
  cudaMalloc(&posts, size_t(sms) * 8);
  cudaMalloc(&state, cusync::sm90::kStreamStateBytes);
  cudaMalloc(&error, sizeof(cusync::SyncErrorInfo));
  cudaMemset(posts, 0, size_t(sms) * 8);
  cudaMemset(state, 0, cusync::sm90::kStreamStateBytes);
  cudaMemset(error, 0, sizeof(cusync::SyncErrorInfo));
  cudaMemcpy(w1, host.data(), size_t(k1) * 2 * hidden * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(w2, host.data() + size_t(k1) * 2 * hidden, size_t(hidden) * n2 * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(x, host.data() + size_t(k1) * 2 * hidden + size_t(hidden) * n2, size_t(4) * k1 * 2, cudaMemcpyHostToDevice);
  int failures = 0;
  for (int gate : {int(cusync::sm90::kNoGate), int(cusync::sm90::kInterleaved), int(cusync::sm90::kHalves)}) {
    for (bool col : {true, false}) {
      for (int mw : {1, 3, 101, 103}) {  // M, plus 100 with W2 column-major
        int const m = mw % 100;
        bool const w2col = mw > 100;
        cusync::sm90::SlabRun r;
        cusync::sm90::SlabArgs& a = r.args;
        a.x = x, a.ldx = k1, a.w1 = w1, a.w1_col = col, a.ldw1 = col ? k1 : (gate ? 2 * hidden : hidden);
        a.h = h, a.ldh = hidden, a.h_raw = gate == cusync::sm90::kHalves ? raw : nullptr, a.ldh_raw = 2 * hidden;
        a.w2 = w2, a.ldw2 = w2col ? hidden : n2, a.w2_col = w2col, a.y = y, a.ldy = n2, a.m = m, a.k1 = k1, a.hidden = hidden, a.n2 = n2;
        a.act1 = gate ? int(cusync::sm90::StreamAct::kSwiglu) : int(cusync::sm90::StreamAct::kGelu), a.gate = gate;
        a.ws = ws, a.posts = posts;
        r.grid = sms, r.state = state, r.error = error, r.timeout_ns = 2000000000ull;
        for (int run = 0; run < 3; ++run) {
          char const* why = nullptr;
          if (kernels.run(r, nullptr, &why) != cusync::Status::kSuccess) {
            std::printf("refused: %s\n", why ? why : "cuda error");
            ++failures;
          }
        }
      }
    }
  }
  cudaError_t const e = cudaDeviceSynchronize();
  cusync::SyncErrorInfo info{};
  cudaMemcpy(&info, error, sizeof(info), cudaMemcpyDeviceToHost);
  std::printf("slab race driver: %s, %d refused, timeout flag %u\n", cudaGetErrorString(e), failures, info.flag);
  return e == cudaSuccess && failures == 0 && info.flag == 0 ? 0 : 1;
}
