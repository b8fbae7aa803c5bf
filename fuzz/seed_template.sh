#!/usr/bin/env bash
# Seeds for the `template` target: each published template of the parser's tests
# (crates/parse/tests/templates/) and each catalogued format's export (`toolshim parse
# --export-format`), each followed by a NUL and every corpus case of its kind.
# Usage (from fuzz/): ./seed_template.sh   (needs a built `toolshim` on PATH or in
# ../target/{release,debug}).
set -euo pipefail
cd "$(dirname "$0")"
bin=$(command -v toolshim || for b in ../target/release/toolshim ../target/debug/toolshim; do [[ -x $b ]] && echo "$b" && break; done)
out=corpus/template
mkdir -p "$out"
seed() { # seed NAME FILE-TEXT CASE
    { printf '\001\001'; printf '%s' "$2"; printf '\000'; grep -v -e '^# source:' -e '^# tools:' -e '^# config:' "$3" || true; } >"$out/$1"
}
for template in ../crates/parse/tests/templates/*.json; do
    name=$(basename "$template" .json)
    for file in ../crates/parse/tests/corpus/formats/*.txt ../crates/parse/tests/corpus/hermes/*.txt; do
        seed "$name-$(basename "$file" .txt)" "$(cat "$template")" "$file"
    done
done
mapfile -t ids < <("$bin" parse --list-formats | awk 'NR > 1 && /^$/ { exit } NR > 1 { print $1 }')
for id in "${ids[@]}"; do
    export=$("$bin" parse --export-format "$id" 2>/dev/null) || continue
    for file in ../crates/parse/tests/corpus/formats/"$id"__*.txt; do
        [[ -e $file ]] && seed "export-$(basename "$file" .txt)" "$export" "$file"
    done
done
echo "$(ls "$out" | wc -l) seeds in $out"
