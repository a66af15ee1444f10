# tests/install/common.sh: what tree.sh, wheel.sh and tests/nvtx/trace.sh share. Sourced.
# The demo's job (scripts/demo): an unmodified Megatron-shaped GPT, TP=2 with sequence
# parallelism, DP=2 with the distributed optimizer and overlapped gradient reduction, 4
# ranks on the vgpu's A40/64, 8 iterations.
WL_ARGS=(--model gpt-tiny --tp 2 --dp 2 --dist-opt --overlap-grad-reduce --gbs 8 --mbs 1 --iters 8 --json)

fail() {
  echo "FAIL: $*"
  exit 1
}

# same_losses BASE.json SI.json: every iteration's loss bit for bit (loss_hex), at least one.
same_losses() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def losses(path):
    t = open(path).read()
    i = t.find("{")
    if i < 0:
        sys.exit("FAIL: %s holds no JSON" % path)
    return [it["loss_hex"] for it in json.JSONDecoder().raw_decode(t[i:])[0]["iterations"]]
b, s = losses(sys.argv[1]), losses(sys.argv[2])
if not b or b != s:
    sys.exit("FAIL: losses differ: baseline %s, with the shim %s" % (b, s))
print("exact: %d iterations, every loss bit-identical (last %s)" % (len(b), b[-1]))
PY
}

# switched ERR: the SI run said it switched to Strand Interleaving (rank 0's line).
switched() {
  grep -q "auto: switched to Strand Interleaving" "$1" ||
    fail "the run with the shim did not switch to Strand Interleaving; its stderr ($1):$(tail -n 20 "$1" | sed 's/^/\n  | /')"
}
