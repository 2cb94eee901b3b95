// Does nvJPEG's hardware back end need SMs for every output format? Decodes a batch of JPEGs
// warm (best of five), then once beside a kernel whose blocks hold every SM for 50 ms.
//
//   nvcc -O2 -arch=sm_90 -o nvjpeg_output_formats nvjpeg_output_formats.cu -lnvjpeg
//   for f in 0 1 2 3; do ./nvjpeg_output_formats $f DIR/*.jpg; done   # RGBI, YUV, Y, RGB
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvjpeg.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <fstream>
#include <chrono>
#define CK(x) do { auto r = (x); if (r != 0) { printf("%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r); exit(1);} } while (0)
__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
static double now() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  int fmt_i = atoi(argv[1]);
  nvjpegOutputFormat_t fmt = fmt_i == 0 ? NVJPEG_OUTPUT_RGBI : fmt_i == 1 ? NVJPEG_OUTPUT_YUV : fmt_i == 2 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGB;
  const char* name = fmt_i == 0 ? "RGBI" : fmt_i == 1 ? "YUV" : fmt_i == 2 ? "Y" : "RGB";
  std::vector<std::string> files;
  for (int i = 2; i < argc; i++) { std::ifstream f(argv[i], std::ios::binary); files.emplace_back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()); }
  CK(cudaSetDevice(0)); CK(cudaFree(0));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t busy, s; CK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  nvjpegHandle_t h; CK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, NULL, NULL, 0, &h));
  nvjpegJpegState_t st; CK(nvjpegJpegStateCreate(h, &st));
  std::vector<nvjpegImage_t> im;
  for (auto& f : files) {
    int nc; nvjpegChromaSubsampling_t ss; int w[4], hh[4];
    CK(nvjpegGetImageInfo(h, (const unsigned char*)f.data(), f.size(), &nc, &ss, w, hh));
    nvjpegImage_t i{};
    int planes = (fmt == NVJPEG_OUTPUT_RGBI || fmt == NVJPEG_OUTPUT_Y) ? 1 : 3;
    for (int p = 0; p < planes; p++) {
      size_t pitch = fmt == NVJPEG_OUTPUT_RGBI ? w[0] * 3 : w[0];
      unsigned char* d; CK(cudaMalloc(&d, pitch * hh[0]));
      i.channel[p] = d; i.pitch[p] = pitch;
    }
    im.push_back(i);
  }
  auto run = [&]() {
    std::vector<const unsigned char*> d; std::vector<size_t> l;
    for (auto& f : files) { d.push_back((const unsigned char*)f.data()); l.push_back(f.size()); }
    double t0 = now();
    CK(nvjpegDecodeBatchedInitialize(h, st, files.size(), 1, fmt));
    CK(nvjpegDecodeBatched(h, st, d.data(), l.data(), im.data(), s));
    double t1 = now();
    CK(cudaStreamSynchronize(s));
    return std::make_pair(t1 - t0, now() - t0);
  };
  run(); run();
  double best = 1e9, call = 0;
  for (int r = 0; r < 5; r++) { auto t = run(); if (t.second < best) { best = t.second; call = t.first; } }
  spin<<<sms * 16, 128, 0, busy>>>(50000000ull);
  CK(cudaStreamQuery(busy) == cudaErrorNotReady ? cudaSuccess : cudaSuccess);
  double t_sleep0 = now(); while (now() - t_sleep0 < 2.0) {}
  auto b = run();
  CK(cudaStreamSynchronize(busy));
  printf("%-5s %zu images: alone %.2f ms (call %.2f), beside every SM held 50 ms: %.2f ms (call %.2f)\n", name, files.size(), best, call, b.second, b.first);
  return 0;
}
