cd target/bundle
R=/tmp/res; rm -rf $R
./gpu-check.sh "$PWD/../../.anchors" $R > /tmp/gc.log 2>&1; echo "gpu-check rc $?"
grep -E "^===|FAILED|panicked|SUMMARY|run-tests|check|gpu-check|error" /tmp/gc.log | grep -v " 0 passed; 0 failed" | sort | uniq -c | sort -rn | head -60
cp $R/bench.txt $R/compare.txt $R/streamline.jsonl $R/torch.jsonl $R/pipelines.txt $OUT/ 2>/dev/null
cp $R/pipeline-prefetch.svg $R/pipeline-augment-train.svg $OUT/ 2>/dev/null
tail -c 300000 /tmp/gc.log > $OUT/gc.log
