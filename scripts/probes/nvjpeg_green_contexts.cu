// Can nvJPEG's hardware decode run while other work holds the GPU's SMs, when the SMs are
// partitioned with green contexts? The decoder runs in a green context of 8 SMs; the other work
// (a kernel of a module loaded in the primary context, 16 blocks of 128 threads per SM spinning
// 50 ms) runs (mode 0) on a primary-context stream, or (mode 1) on a stream of a green context
// of the other SMs. The decoder's output buffers come from the primary context.
//
//   nvcc -ptx -arch=sm_90 -o spin.ptx nvjpeg_green_spin.cu
//   nvcc -O2 -arch=sm_90 -o nvjpeg_green_contexts nvjpeg_green_contexts.cu -lcuda -lnvjpeg
//   for m in 0 1; do ./nvjpeg_green_contexts $m DIR/*.jpg; done   # in the folder of spin.ptx
#include <cuda.h>
#include <nvjpeg.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <fstream>
#include <chrono>
#include <algorithm>
#define CK(x) do { auto r = (x); if (r != 0) { printf("%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r); exit(1);} } while (0)
static double now() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  int mode = atoi(argv[1]);
  std::vector<std::string> files;
  for (int i = 2; i < argc; i++) { std::ifstream f(argv[i], std::ios::binary); files.emplace_back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()); }
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0));
  CUcontext primary; CK(cuDevicePrimaryCtxRetain(&primary, dev)); CK(cuCtxSetCurrent(primary));
  CUmodule mod; CK(cuModuleLoad(&mod, "spin.ptx")); CUfunction spin; CK(cuModuleGetFunction(&spin, mod, "spin"));
  int sms; CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CUdevResource all; CK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  CUdevResource part, rest; unsigned groups = 1;
  CK(cuDevSmResourceSplitByCount(&part, &groups, &all, &rest, 0, 8));
  CUdevResourceDesc dd, td; CK(cuDevResourceGenerateDesc(&dd, &part, 1)); CK(cuDevResourceGenerateDesc(&td, &rest, 1));
  CUgreenCtx gd, gt; CK(cuGreenCtxCreate(&gd, dd, dev, CU_GREEN_CTX_DEFAULT_STREAM)); CK(cuGreenCtxCreate(&gt, td, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUcontext cd; CK(cuCtxFromGreenCtx(&cd, gd));
  CUstream busy, s;
  if (mode == 0) CK(cuStreamCreate(&busy, CU_STREAM_NON_BLOCKING)); else CK(cuGreenCtxStreamCreate(&busy, gt, CU_STREAM_NON_BLOCKING, 0));
  CK(cuGreenCtxStreamCreate(&s, gd, CU_STREAM_NON_BLOCKING, 0));
  // Output buffers from the primary context.
  std::vector<nvjpegImage_t> im;
  {
    nvjpegHandle_t h0; CK(nvjpegCreateSimple(&h0));
    for (auto& f : files) {
      int nc; nvjpegChromaSubsampling_t ss; int w[4], hh[4];
      CK(nvjpegGetImageInfo(h0, (const unsigned char*)f.data(), f.size(), &nc, &ss, w, hh));
      nvjpegImage_t i{}; CUdeviceptr d; CK(cuMemAlloc(&d, (size_t)w[0] * 3 * hh[0])); i.channel[0] = (unsigned char*)d; i.pitch[0] = w[0] * 3;
      im.push_back(i);
    }
  }
  CK(cuCtxSetCurrent(cd));
  nvjpegHandle_t h; CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, NULL, NULL, 0, &h));
  nvjpegJpegState_t st; CK(nvjpegJpegStateCreate(h, &st));
  auto run = [&]() {
    std::vector<const unsigned char*> d; std::vector<size_t> l;
    for (auto& f : files) { d.push_back((const unsigned char*)f.data()); l.push_back(f.size()); }
    double t0 = now();
    CK(nvjpegDecodeBatchedInitialize(h, st, files.size(), 1, NVJPEG_OUTPUT_RGBI));
    CK(nvjpegDecodeBatched(h, st, d.data(), l.data(), im.data(), (cudaStream_t)s));
    CK(cuStreamSynchronize(s));
    return now() - t0;
  };
  run(); run();
  double best = 1e9; for (int r = 0; r < 5; r++) best = std::min(best, run());
  CK(cuCtxSetCurrent(primary));
  unsigned long long ns = 50000000ull; void* args[] = {&ns};
  unsigned blocks = (mode == 0 ? sms : rest.sm.smCount) * 16;
  CK(cuLaunchKernel(spin, blocks, 1, 1, 128, 1, 1, 0, busy, args, nullptr));
  CK(cuCtxSetCurrent(cd));
  double t_sleep0 = now(); while (now() - t_sleep0 < 2.0) {}
  double b = run();
  CK(cuStreamSynchronize(busy));
  // The decoded bytes are readable from the primary context.
  CK(cuCtxSetCurrent(primary));
  unsigned char px[4]; CK(cuMemcpyDtoH(px, (CUdeviceptr)im[0].channel[0], 4));
  printf("mode %d (%s): decoder on %u SMs; alone %.2f ms, beside the engine's kernel (%u blocks of 128): %.2f ms; first bytes %u %u %u\n",
         mode, mode == 0 ? "engine on the primary context" : "engine's kernel on a green context of the other SMs",
         part.sm.smCount, best, blocks, b, px[0], px[1], px[2]);
  return 0;
}
