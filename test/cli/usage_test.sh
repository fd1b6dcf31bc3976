# `grove` itself: help, version, and command lines that make no sense.
source "$(dirname "$0")/common.bash"
G=$GROVE_BIN

if expect_ok "$G" --help; then
  expect_stdout '^Usage: grove <command>'
  expect_stdout '^  run '
  expect_stdout '^  inspect '
fi
expect_ok "$G" help
expect_ok "$G" -h
if expect_ok "$G" version; then expect_stdout '^grove [0-9]+\.[0-9]+\.[0-9]+ \(model format [0-9]+\)$'; fi
expect_ok "$G" --version
if expect_ok "$G" inspect --help; then expect_stdout '^Usage: grove inspect MODEL.grove'; fi

capture "$G"
[ "$RC" -eq 2 ] || fail "no arguments exited $RC, want 2"
grep -q '^Usage: grove' "$ERR" || fail "no arguments printed no usage on stderr"

expect_fail 2 "unknown command 'frobnicate'" "$G" frobnicate
expect_fail 2 "unknown flag '--frobnicate'" "$G" --frobnicate
expect_fail 2 "'version' takes no arguments" "$G" version extra

finish
