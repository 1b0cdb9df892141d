#!/bin/sh
# The weight-sharing size rule on the shared pair: llm_prefill and llm_decode (same weights, different
# graphs) compiled together with `epstack ctxgen` give one context binary at most 1.05x the binary of llm_prefill
# compiled alone; both _ctx.onnx files then run with nothing compiled.
# Usage: check_weight_sharing.sh EPSTACK MODELS_DIR WORK_DIR PROVIDER
set -eu
EPSTACK=$1
MODELS=$2
WORK=$3
EP=$4
for m in llm_prefill llm_decode; do
  [ -f "$MODELS/$m.onnx" ] || { echo "SKIP: $MODELS/$m.onnx not generated"; exit 77; }
done
rm -rf "$WORK" && mkdir -p "$WORK/alone" "$WORK/shared"
for m in llm_prefill llm_decode; do
  cp "$MODELS/$m.onnx" "$WORK/shared/"
  [ -e "$MODELS/$m.onnx.data" ] && cp "$MODELS/$m.onnx.data" "$WORK/shared/"
done
cp "$WORK/shared/llm_prefill.onnx"* "$WORK/alone/"
# ONNX Runtime's priority placement: the provider under test compiles everything it claims (by estimate, a machine
# on which it is not clearly cheaper leaves the CPU provider the models, and there is no binary to share).
"$EPSTACK" compile "$WORK/alone/llm_prefill.onnx" --providers "$EP,cpu" --config epstack.placement=priority >/dev/null
"$EPSTACK" ctxgen -e "$EP" -C "epstack.placement|priority" "$WORK/shared/llm_prefill.onnx,$WORK/shared/llm_decode.onnx" >/dev/null
alone=$(stat -c %s "$WORK/alone/llm_prefill_$EP.bin")
both=$(stat -c %s "$WORK/shared/llm_prefill_$EP.bin")
files=$(ls "$WORK/shared" | grep -c -E '_ctx\.onnx$|\.bin$')
echo "llm_prefill alone: $alone bytes; llm_prefill + llm_decode shared: $both bytes; ctx files + binaries: $files"
[ "$files" -eq 3 ] || { echo "FAIL: expected 2 _ctx.onnx and 1 binary, found $files"; exit 1; }
/usr/bin/env awk -v a="$alone" -v b="$both" 'BEGIN { r = b / a; printf "ratio %.4f (limit 1.05)\n", r; exit !(r <= 1.05) }' ||
  { echo "FAIL: the shared binary is more than 1.05x llm_prefill's alone"; exit 1; }
for m in llm_prefill llm_decode; do
  "$EPSTACK" run "$WORK/shared/${m}_ctx.onnx" --providers "$EP,cpu" --config session.disable_model_compile=1 >/dev/null
done
echo "both context models run with nothing compiled"
