// The kernel that holds SMs for `nvjpeg_green_contexts.cu` (compiled to spin.ptx).
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long t0, t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
