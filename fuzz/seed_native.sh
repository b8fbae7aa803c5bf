#!/usr/bin/env bash
# Seeds for the `native` target: each format corpus file (crates/parse/tests/corpus/
# formats/ID__case.txt, header lines dropped) behind the byte that picks format ID,
# once without and once with the tool list, fed one character at a time.
# Usage (from fuzz/): ./seed_native.sh   (needs a built `toolshim` on PATH or in
# ../target/{release,debug}).
set -euo pipefail
cd "$(dirname "$0")"
bin=$(command -v toolshim || for b in ../target/release/toolshim ../target/debug/toolshim; do [[ -x $b ]] && echo "$b" && break; done)
mapfile -t ids < <("$bin" parse --list-formats | awk 'NR > 1 && /^$/ { exit } NR > 1 { print $1 }')
n=${#ids[@]}
out=corpus/native
mkdir -p "$out"
for file in ../crates/parse/tests/corpus/formats/*.txt; do
    id=$(basename "$file" .txt)
    id=${id%%__*}
    for i in "${!ids[@]}"; do
        [[ ${ids[$i]} == "$id" ]] || continue
        for pick in "$i" "$((i + n))"; do
            seed="$out/$(basename "$file" .txt)-$pick"
            printf "$(printf '\\%03o\\000' "$pick")" >"$seed"
            grep -v -e '^# source:' -e '^# tools:' -e '^# config:' "$file" >>"$seed" || true
        done
    done
done
echo "$(ls "$out" | wc -l) seeds in $out"
