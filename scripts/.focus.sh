cd target/bundle
timeout 300 ./tests/test-image --test-threads=1 2>&1 | grep -E "test result|panicked|assert|left|right|error" | head -20
./streamline bench --filter _b 2>&1 | grep -E "roi|rotate|resize|blur|augment" 
