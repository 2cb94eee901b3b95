cd target/bundle
timeout 300 ./tests/test-image --test-threads=1 2>&1 | grep -E "test result|panicked|assert|left|right|error|FAILED" | head -20
for tool in memcheck racecheck synccheck; do PROPTEST_CASES=6 timeout 200 compute-sanitizer --tool $tool --require-cuda-init no ./tests/test-image --test-threads=1 augment 2>&1 | grep -E "SUMMARY|test result"; done
./streamline bench --filter _b 2>&1 | grep -E "roi|rotate|resize|blur|augment|normalize"
