#!/usr/bin/env bash
# docs.layout: the house's layout holds what README.md and scheduler/CMakeLists.txt say.
#   - scheduler/'s own top level holds at most 10 files;
#   - its layers, lowest first: real ops mem dispatch modes; a header of one layer includes
#     headers of its own layer or lower ones only (a .c file may call up through a table
#     that the higher layer registers, never through its header: the .c rule is not checked);
#   - every folder of a layer has a main header named in LAYER_MAIN below, which opens with
#     a comment that says what the folder owns ("owns") and what it may call ("may call");
#   - README.md holds at most 300 lines, and every relative link in README.md, docs/*.md and
#     the Markdown files of the source folders names a file (or folder) that exists, and
#     every anchor such a link names (#section, in the page itself or another Markdown file)
#     is a heading there (GitHub's anchors); a source path such a file names in inline code
#     (`scheduler/modes/tracker.c`) exists.
# Prints every violation and exits 1 if there is one.
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2
bad=0
fail() { echo "docs.layout: $*"; bad=1; }

n=$(find scheduler -maxdepth 1 -type f | wc -l)
[ "$n" -le 10 ] || fail "scheduler/ holds $n files at its top level (at most 10)"

layers=(real ops mem dispatch modes)
declare -A LAYER_MAIN=([real]=real.h [ops]=op.h [mem]=mempool.h [dispatch]=scheduler.h
                       [modes]=mode.h)
declare -A rank owner
for i in "${!layers[@]}"; do
  l=${layers[$i]}
  rank[$l]=$i
  [ -d "scheduler/$l" ] || { fail "scheduler/$l is missing"; continue; }
  for h in scheduler/"$l"/*.h; do owner[$(basename "$h")]=$l; done
  main=scheduler/$l/${LAYER_MAIN[$l]}
  if [ ! -f "$main" ]; then
    fail "$main (the main header of scheduler/$l) is missing"
  else
    head=$(sed -n '1,/\*\//p' "$main")
    grep -q "owns" <<<"$head" || fail "$main: its opening comment does not say what the folder owns"
    grep -q "may call" <<<"$head" || fail "$main: its opening comment does not say what the folder may call"
  fi
done
for l in "${layers[@]}"; do
  for h in scheduler/"$l"/*.h; do
    [ -f "$h" ] || continue
    while read -r inc; do
      o=${owner[$inc]:-}
      [ -n "$o" ] || continue
      if [ "${rank[$o]}" -gt "${rank[$l]}" ]; then
        fail "$h (layer $l) includes $inc of the higher layer $o"
      fi
    done < <(sed -n 's/^#include "\([^"/]*\)".*/\1/p' "$h")
  done
done

if [ -f README.md ]; then
  lines=$(wc -l < README.md)
  [ "$lines" -le "${DH_README_MAX_LINES:-300}" ] ||
    fail "README.md has $lines lines (at most ${DH_README_MAX_LINES:-300})"
fi
# slugs FILE: the anchors of FILE's headings, one a line, as GitHub makes them: the heading's
# text (link targets and code fences dropped), lower case, ASCII punctuation but - and _
# removed, each space a -, and -1, -2, ... after a repeated one. Non-ASCII characters are
# kept (GitHub keeps letters and drops symbols such as arrows; no heading here has one).
slugs() {
  awk '/^(```|~~~)/ { fence = !fence; next } !fence && /^#+ / { print }' "$1" |
    sed -e 's/^#* *//' -e 's/ *#* *$//' -e 's/\[\([^]]*\)\]([^)]*)/\1/g' |
    LC_ALL=C tr 'A-Z' 'a-z' |
    LC_ALL=C tr -d '!"#$%&'"'"'()*+,./:;<=>?@[\\]^`{|}~' |
    tr ' ' '-' |
    awk '{ n = seen[$0]++; print (n ? $0 "-" n : $0) }'
}
# links FILE: the targets of FILE's [text](target) links and images, outside code fences
# and inline code.
links() {
  awk '/^(```|~~~)/ { fence = !fence; next } !fence { print }' "$1" |
    sed 's/`[^`]*`//g' | grep -o '\](\([^)]*\))' | sed -e 's/^](\(.*\))$/\1/' -e 's/ .*//'
}
declare -A anchors
# has_anchor FILE SLUG: whether FILE has a heading whose anchor is SLUG.
has_anchor() {
  [ -n "${anchors[$1]+set}" ] || anchors[$1]=$'\n'$(slugs "$1")$'\n'
  [[ ${anchors[$1]} == *$'\n'"$2"$'\n'* ]]
}
mds=(README.md docs/*.md)
while IFS= read -r f; do mds+=("$f"); done < <(find scheduler tests preload nccl_wrap scripts -name '*.md' | sort)
for md in "${mds[@]}"; do
  [ -f "$md" ] || continue
  dir=$(dirname "$md")
  # Relative links: the file (or folder) must exist, and an anchor (#...) into a Markdown
  # file, this one included, must name one of its headings. Web addresses are not fetched.
  while read -r target; do
    case "$target" in http://*|https://*|mailto:*) continue ;; esac
    path=${target%%#*}
    file=$md
    if [ -n "$path" ]; then
      file=$dir/$path
      [ -e "$file" ] || { fail "$md links to $target, which does not exist"; continue; }
    fi
    [ "$path" = "$target" ] && continue
    anchor=${target#*#}
    case "$file" in *.md) ;; *) continue ;; esac
    has_anchor "$file" "$anchor" || fail "$md links to $target: $file has no heading with that anchor"
  done < <(links "$md")
  # Source paths named in inline code (`scheduler/modes/tracker.c`), from the repository's
  # root, must exist too: a file that moved leaves no stale name behind in the docs.
  while read -r path; do
    [ -e "$path" ] || fail "$md names $path, which does not exist"
  done < <(awk '/^(```|~~~)/ { fence = !fence; next } !fence { print }' "$md" |
             grep -o '`[^`]*`' | tr -d '`' |
             grep -E '^(preload|nccl_wrap|scheduler|tests|scripts|docs|cmake)/[A-Za-z0-9_./-]*$')
done
[ "$bad" -eq 0 ] && echo "docs.layout: scheduler/ layers, README.md and the links in docs/ hold"
exit "$bad"
