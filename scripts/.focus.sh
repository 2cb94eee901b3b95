cd target/bundle
for s in 4096 8192; do ./streamline matmul --m $s --n $s --k $s --kernel all --vs-cublas --repeat 10 2>&1 | grep -v "naive\|tiled\|blocked"; done
for s in 1024 2048; do ./streamline matmul --m $s --n $s --k $s --kernel all --vs-cublas --repeat 20 2>&1 | grep -v "naive\|tiled"; done
./streamline matmul --m 4096 --n 4096 --k 4096 --kernel 5_pipelined_128x128 --check --repeat 3 2>&1 | grep check
./run-tests.sh sgemm_edge 2>&1 | grep -E "test result: ok. 1|panicked"
