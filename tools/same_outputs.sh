#!/bin/sh
# Runs a fixed list of commands with two builds of the tool and compares what
# they write, byte for byte: every file of --out, --save, --predict, --log
# and the pictures, and standard output with its timings blanked. For a
# restructuring that must not change behaviour (issue 41): build the old
# commit in a worktree, then
#
#     tools/same_outputs.sh /tmp/before/build/attngraph build/attngraph
#
# Exit 0 when every output is the same and every command ended as the list
# says (its exit status); else each difference is listed.
set -u
OLD=$(realpath "$1")
NEW=$(realpath "$2")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/same-outputs.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
status=0
TEXT=$ROOT/../shared/data/tinyshakespeare/input.txt
P="graphs/planted.gml --features graphs/planted/x.npy --labels graphs/planted/labels.npy \
--train-mask graphs/planted/train.npy --eval-mask graphs/planted/eval.npy"

# name|exit status|command line (AG is the tool; files go to the current folder)
cat > "$WORK/commands" <<EOF
run|0|AG run graphs/sentence.gml --dim 16 --heads 2 --rounds 2 --seed 7 --out states.npy
run-score|0|AG run graphs/karate.gml --dim 8 --heads 2 --score additive --norm layer --rounds 3 --out s.npy
run-pattern|0|AG run --pattern window:3 --nodes 40 --dim 8 --heads 2 --score cosine --out s.npy
train|0|AG train $P --rounds 2 --heads 2 --epochs 30 --save model --log log.csv
train-run|0|AG run graphs/planted.gml --features graphs/planted/x.npy --weights model --heads 2 --rounds 2 --predict classes.npy
gat|0|AG train $P --model gat.txt --epochs 20 --seed 3 --save gat --log log.csv
gat-run|0|AG run graphs/planted.gml --features graphs/planted/x.npy --weights gat --predict classes.npy --out states.npy
transformer|0|AG train $P --model tf.txt --epochs 10 --save tf
transformer-run|0|AG run graphs/planted.gml --features graphs/planted/x.npy --weights tf --out states.npy
keys|0|AG train $P --model keys.txt --epochs 5 --undirected --save keys
refused|2|AG train $P --model bad.txt
plan|0|AG plan --ranks 4,64 --pattern window:8 --nodes 5000 --rate 10,20 --csv plan.csv
plan-json|0|AG plan --ranks 3 --partition metis graphs/karate.gml --rate 10,20 --json
heatmap|0|AG draw heatmap graphs/karate.gml --heads 2 --out karate.svg
lm|0|AG lm train --text $TEXT --iters 6 --block 16 --batch 2 --dim 32 --layers 2 --heads 2 --pattern window:4 --save lm --eval-iters 2 --eval-every 3 --log lm.csv
lm-sample|0|AG lm sample --model lm --start ROMEO: --tokens 40 --seed 5
EOF

for side in old new; do
    mkdir -p "$WORK/$side"
    ln -s "$ROOT/graphs" "$ROOT/models" "$WORK/$side/"
    # models/gat-cora.txt and transformer-cora.txt with planted's 3 classes
    sed 's/dim=7/dim=3/' "$ROOT/models/gat-cora.txt" > "$WORK/$side/gat.txt"
    sed 's/dim=7/dim=3/; s/^norm .*//; /^layer heads=8/s/$/ norm=pre qkv_bias=yes skip=gate/' \
        "$ROOT/models/transformer-cora.txt" > "$WORK/$side/tf.txt"
    printf 'norm layer\n' >> "$WORK/$side/tf.txt"
    printf 'score gatv2\nslope 0.1\nbeta 2\nsoftcap 30\nposenc sinusoidal\nresid-dropout 0.1\n%s\n%s\n' \
        'layer heads=2 dim=4 out=concat act=relu residual=no' 'layer heads=1 dim=3 out=mean' \
        > "$WORK/$side/keys.txt"
    printf 'score additive\nlayers heads=2 dim=4\n' > "$WORK/$side/bad.txt"
done
while IFS='|' read -r name want cmd; do
    for side in old new; do
        bin=$OLD
        [ "$side" = new ] && bin=$NEW
        dir=$WORK/$side
        line=$(printf '%s' "$cmd" | sed "s|^AG |$bin |")
        (cd "$dir" && sh -c "$line" > "$name.stdout" 2> "$name.stderr" </dev/null
         echo $? > "$name.rc")
        if [ "$(cat "$dir/$name.rc")" != "$want" ]; then
            echo "$side: $name exited $(cat "$dir/$name.rc"), expected $want: $(head -n 2 "$dir/$name.stderr")"
            status=1
        fi
        # timings differ from run to run: blank every number beside a unit of time
        # (and lm's table of its runs ends with the seconds and the ms a step)
        sed -E 's/[0-9.]+ ?(ms|s|us|µs|min|[a-zA-Z]+\/s)\b/T\1/g' "$dir/$name.stdout" |
            if [ "$name" = lm ]; then sed -E 's/ +[0-9.]+ +[0-9.]+$/ T T/'; else cat; fi \
            > "$dir/$name.out"
        rm -f "$dir/$name.stdout"
    done
done < "$WORK/commands"

# every file either side wrote, compared (a CSV's seconds column blanked)
(cd "$WORK/old" && find . -type f | sort) > "$WORK/old.files"
(cd "$WORK/new" && find . -type f | sort) > "$WORK/new.files"
if ! cmp -s "$WORK/old.files" "$WORK/new.files"; then
    echo "different files written:"
    diff "$WORK/old.files" "$WORK/new.files"
    status=1
fi
n=0
while read -r f; do
    [ -f "$WORK/new/$f" ] || continue
    n=$((n + 1))
    a=$WORK/old/$f b=$WORK/new/$f
    if [ "${f%.csv}" != "$f" ] && head -n 1 "$a" | grep -q ',seconds$'; then
        sed -E 's/,[0-9.e+-]+$/,T/' "$a" >"$WORK/a"
        sed -E 's/,[0-9.e+-]+$/,T/' "$b" >"$WORK/b"
        a=$WORK/a b=$WORK/b
    fi
    if ! cmp -s "$a" "$b"; then
        echo "differs: $f"
        diff "$a" "$b" | head -5
        status=1
    fi
done < "$WORK/old.files"
echo "same_outputs: $n files compared; $(grep -c . "$WORK/commands") commands; $([ $status = 0 ] && echo 'all the same' || echo 'DIFFERENCES')"
exit $status
