#!/usr/bin/env bash
# Checks what a change adds, not the code it leaves alone:
#   - clang-format (.clang-format) on the changed lines of C++ files,
#   - clang-tidy (.clang-tidy) on the changed lines of C++ files (not CUDA),
#   - every commit subject of the range at most 72 characters.
# Prints file:line (or commit: subject) for each violation and exits 1 if
# there is one, 2 on a usage or set-up error.
#
#   scripts/lint-changed.sh [--no-tidy] [--fix] [BASE]
#
# BASE is a commit: the change is BASE..HEAD plus uncommitted (and untracked)
# files in the work tree. Without it: the merge-base with origin/main (or
# main) when HEAD is ahead of it, else the last commit (HEAD~1..HEAD, by
# first parent, so a merge commit stands for everything it merged). A
# history of one commit, or a shallow clone that stops at HEAD, has nothing
# to compare with: the script says so and passes.
#
# --fix     first rewrites the changed lines with clang-format (git
#           clang-format; commit the result), then checks as usual.
# --no-tidy skips clang-tidy, e.g. where no build/compile_commands.json is.
#
# Environment: CLANG_FORMAT (clang-format-22), CLANG_TIDY (clang-tidy-22),
# BUILD_DIR (build; clang-tidy reads its compile_commands.json and the
# headers the build generates), JOBS (nproc), LINT_TIDY_MAX_FILES (12:
# a larger change is left to clang-tidy run by hand, which the script
# prints, so that this stays within a minute or two on 2 cores),
# LINT_SUBJECT_MAX (72).
set -uo pipefail

CLANG_FORMAT=${CLANG_FORMAT:-clang-format-22}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy-22}
JOBS=${JOBS:-$(nproc)}
LINT_TIDY_MAX_FILES=${LINT_TIDY_MAX_FILES:-12}
LINT_SUBJECT_MAX=${LINT_SUBJECT_MAX:-72}

tidy=1
fix=0
base=""
while (($#)); do
  case $1 in
    --no-tidy) tidy=0 ;;
    --fix) fix=1 ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "lint-changed: unknown option '$1' (see --help)" >&2
      exit 2
      ;;
    *)
      [[ -z $base ]] || { echo "lint-changed: one BASE only, got '$base' and '$1'" >&2; exit 2; }
      base=$1
      ;;
  esac
  shift
done

top=$(git rev-parse --show-toplevel 2>/dev/null) || {
  echo "lint-changed: not inside a git work tree" >&2
  exit 2
}
cd "$top" || exit 2
BUILD_DIR=${BUILD_DIR:-build}

# --- the range -------------------------------------------------------------
if [[ -n $base ]]; then
  git rev-parse -q --verify "$base^{commit}" > /dev/null || {
    echo "lint-changed: '$base' is not a commit" >&2
    exit 2
  }
  describe="$base"
else
  for upstream in origin/main main; do
    git rev-parse -q --verify "$upstream^{commit}" > /dev/null || continue
    mb=$(git merge-base "$upstream" HEAD 2> /dev/null) || continue
    if [[ $mb != "$(git rev-parse HEAD)" ]]; then
      base=$mb
      describe="merge-base with $upstream"
    fi
    break
  done
  if [[ -z $base ]]; then
    if git rev-parse -q --verify "HEAD~1^{commit}" > /dev/null; then
      base=HEAD~1
      describe="HEAD~1, the last commit"
    else
      echo "lint-changed: HEAD has no parent here (one commit, or a shallow clone): nothing to compare with, nothing checked"
      exit 0
    fi
  fi
fi
base_sha=$(git rev-parse "$base^{commit}")
echo "lint-changed: checking changes since ${base_sha:0:12} ($describe)"

status=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- commit subjects -------------------------------------------------------
# Characters, not bytes: count in a UTF-8 locale.
while IFS= read -r -d '' record; do
  sha=${record%%$'\x1f'*}
  subject=${record#*$'\x1f'}
  length=$(LC_ALL=C.UTF-8 awk '{ print length($0) }' <<< "$subject")
  if ((length > LINT_SUBJECT_MAX)); then
    echo "${sha:0:12}: commit subject is $length characters (at most $LINT_SUBJECT_MAX; details go in the body): $subject"
    status=1
  fi
done < <(git log -z --format='%H%x1f%s' "$base_sha..HEAD")

# --- changed lines of C++ files --------------------------------------------
# ranges.txt: "path first last" for each added or changed run of lines in the
# work tree against BASE (renames followed; deletions have no lines).
cxx_globs=('*.cpp' '*.cc' '*.h' '*.hpp' '*.cu' '*.cuh')
git diff -U0 --no-color --no-ext-diff --src-prefix=a/ --dst-prefix=b/ -M --diff-filter=d "$base_sha" -- "${cxx_globs[@]}" |
  awk '
    /^\+\+\+ / { file = substr($0, 7); next }
    /^@@ / {
      split($3, r, ",")
      start = substr(r[1], 2) + 0
      count = (2 in r) ? r[2] + 0 : 1
      if (count > 0) print file, start, start + count - 1
    }' > "$tmp/ranges.txt"
# New files nobody has added yet count whole.
git ls-files --others --exclude-standard -- "${cxx_globs[@]}" | while IFS= read -r f; do
  n=$(wc -l < "$f")
  ((n > 0)) && echo "$f 1 $n"
done >> "$tmp/ranges.txt"
mapfile -t files < <(awk '{ print $1 }' "$tmp/ranges.txt" | sort -u)
echo "lint-changed: ${#files[@]} C++ file(s) changed"

need() {
  command -v "$1" > /dev/null || {
    echo "lint-changed: $1 not found (Debian: apt-get install $2; scripts/setup.sh --test installs it)" >&2
    exit 2
  }
}

if ((${#files[@]})); then
  need "$CLANG_FORMAT" clang-format-22
  if ((fix)); then
    # git clang-format rewrites only the lines changed since BASE.
    need git-clang-format-22 clang-format-22
    git-clang-format-22 --binary "$(command -v "$CLANG_FORMAT")" --force "$base_sha" -- "${files[@]}" ||
      status=1
  fi
  # clang-format: one run per file over its changed lines; its
  # file:line:col reports (one per misplaced token) become one line per
  # source line.
  for f in "${files[@]}"; do
    lines=$(awk -v f="$f" '$1 == f { printf " --lines=%d:%d", $2, $3 }' "$tmp/ranges.txt")
    # shellcheck disable=SC2086
    if ! "$CLANG_FORMAT" --dry-run -Werror --style=file $lines "$f" 2> "$tmp/format.txt"; then
      if grep -q -- '-Wclang-format-violations' "$tmp/format.txt"; then
        grep -- '-Wclang-format-violations' "$tmp/format.txt" |
          awk -F: '!seen[$1 ":" $2]++ { print $1 ":" $2 ": not formatted as .clang-format says" }'
      else
        cat "$tmp/format.txt" # clang-format itself failed (a bad .clang-format, say)
      fi
      status=1
      format_failed=1
    fi
  done
  if [[ -n ${format_failed:-} ]]; then
    hint=$base
    [[ $hint =~ ^[0-9a-f]{40}$ ]] && hint=${hint:0:12}
    echo "lint-changed: to format those lines: scripts/lint-changed.sh --fix $hint"
  fi
fi

# --- clang-tidy on the changed lines ---------------------------------------
mapfile -t tidy_files < <(printf '%s\n' "${files[@]}" | grep -E '\.(cpp|cc|h|hpp)$')
if ((tidy && ${#tidy_files[@]})); then
  if [[ ! -f $BUILD_DIR/compile_commands.json ]]; then
    echo "lint-changed: clang-tidy not run: no $BUILD_DIR/compile_commands.json (configure and build first, or --no-tidy)" >&2
    exit 2
  elif ((${#tidy_files[@]} > LINT_TIDY_MAX_FILES)); then
    echo "lint-changed: clang-tidy not run: ${#tidy_files[@]} files changed, more than LINT_TIDY_MAX_FILES=$LINT_TIDY_MAX_FILES;"
    echo "  run it on them with: LINT_TIDY_MAX_FILES=${#tidy_files[@]} scripts/lint-changed.sh ${base_sha:0:12}"
  else
    need "$CLANG_TIDY" clang-tidy-22
    # clang-tidy gives a header the command of the source it matches best
    # (Device.h takes Device.cu's), and nvcc's flags are not clang's: it
    # reads a copy of the compilation database without the CUDA sources.
    mkdir "$tmp/db"
    python3 - "$BUILD_DIR/compile_commands.json" "$tmp/db/compile_commands.json" << 'PY' || exit 2
import json, sys
entries = json.load(open(sys.argv[1]))
json.dump([e for e in entries if not e["file"].endswith(".cu")], open(sys.argv[2], "w"))
PY
    tidy_db=$tmp/db
    # g++'s own headers (omp.h) after clang's, which clang does not ship.
    gcc_include=$(c++ -print-file-name=include 2> /dev/null || true)
    export CLANG_TIDY tidy_db gcc_include tmp
    for f in "${tidy_files[@]}"; do
      awk -v f="$f" '$1 == f { r = r sep "[" $2 "," $3 "]"; sep = "," }
                     END { printf "[{\"name\":\"%s\",\"lines\":[%s]}]", f, r }' \
        "$tmp/ranges.txt" > "$tmp/filter.$(echo "$f" | tr / _)"
    done
    printf '%s\0' "${tidy_files[@]}" | xargs -0 -n 1 -P "$JOBS" bash -c '
      f=$1; key=$(echo "$f" | tr / _)
      extra=(); [[ -d $gcc_include ]] && extra=(--extra-arg=-idirafter$gcc_include)
      "$CLANG_TIDY" -p "$tidy_db" --quiet --warnings-as-errors="*" \
        --line-filter="$(cat "$tmp/filter.$key")" "${extra[@]}" "$f" \
        > "$tmp/tidy.$key" 2> "$tmp/tidy-stderr.$key"
      echo $? > "$tmp/tidy-rc.$key"' _
    for f in "${tidy_files[@]}"; do
      key=$(echo "$f" | tr / _)
      if [[ $(cat "$tmp/tidy-rc.$key") != 0 ]]; then
        # Diagnostics and their notes, named relative to the work tree;
        # compiler errors go to stderr.
        sed "s|^$top/||" "$tmp/tidy.$key"
        grep -v -e '^[0-9]* warnings\? \(and [0-9]* errors\? \)\?generated' \
          -e '^Suppressed [0-9]* warnings' -e '^Use -header-filter' "$tmp/tidy-stderr.$key"
        status=1
      fi
    done
  fi
fi

if ((status)); then
  echo "lint-changed: FAILED"
else
  echo "lint-changed: clean"
fi
exit $status
