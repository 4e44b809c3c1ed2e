// cusync runtime: one kernel launch, optionally as a programmatic dependent launch (sm90) of the kernel
// before it on the stream. The launched kernel may then start while that kernel still runs; what it
// reads from it must be ordered by tile waits (or by griddepcontrol.wait).
#pragma once

#include <cuda_runtime.h>

namespace cusync {

template <typename... KernelArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem_bytes, bool programmatic,
                          cudaStream_t stream, Args const&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace cusync
