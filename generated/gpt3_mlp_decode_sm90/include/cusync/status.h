// cusync runtime: status codes returned by every host entry point (no exit() in library code).
#pragma once

namespace cusync {

enum class Status : int {
  kSuccess = 0,
  kInvalidArgument = 1,   // a pointer is null, M is out of range, or a policy is not valid for this chain
  kCudaError = 2,         // a CUDA runtime call failed; cudaGetLastError() says which
  kCutlassError = 3,      // CUTLASS rejected the problem (alignment, workspace)
  kSyncTimeout = 4,       // a spin-wait gave up; SyncErrorInfo names the stage and tile
  kNotInitialized = 5,    // run() before initialize()
  kLibraryError = 6,      // sm90 mode kCublasLt: cuBLASLt found no algorithm or failed
  kInternalError = 7,     // the C ABI caught a C++ exception (out of host memory) at its boundary
};

inline char const* to_string(Status status) {
  switch (status) {
    case Status::kSuccess: return "success";
    case Status::kInvalidArgument: return "invalid argument";
    case Status::kCudaError: return "CUDA error";
    case Status::kCutlassError: return "CUTLASS error";
    case Status::kSyncTimeout: return "tile sync timeout";
    case Status::kNotInitialized: return "not initialized";
    case Status::kLibraryError: return "cuBLASLt error";
    case Status::kInternalError: return "internal error (a C++ exception at the C ABI)";
  }
  return "unknown";
}

}  // namespace cusync
