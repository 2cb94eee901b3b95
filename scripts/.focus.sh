cd target/bundle
R=/tmp/res
./gpu-check.sh "$PWD/../../.anchors" $R > /tmp/gc.log 2>&1; echo "gpu-check rc $?"
grep -E "^===|FAILED|panicked|SUMMARY|test result|run-tests|check |gpu-check" /tmp/gc.log | grep -v " 0 passed; 0 failed" | head -150
cp $R/bench.txt $R/compare.txt $R/streamline.jsonl $R/torch.jsonl $R/matmul.txt $OUT/ 2>/dev/null
cp $R/augment/contact_sheet.png $OUT/ 2>/dev/null
tail -c 200000 /tmp/gc.log > $OUT/gc.log
ls $R $R/augment | head -40
