#!/usr/bin/env bash
# tictac info: lists backends with a viability reason, never echoes secrets, rejects bad flags.
set -u
tictac=$1
fail() { echo "FAIL: $*"; exit 1; }

out=$("$tictac" info) || fail "info exited $?"
grep -Eq '^  tcp +viable' <<<"$out" || fail "tcp not listed as viable: $out"
grep -Eq '^  verbs +(viable|not viable) +.+' <<<"$out" || fail "verbs line without a reason: $out"
grep -Eq 'CUDA (not )?viable' <<<"$out" || fail "no CUDA line: $out"
grep -Eq '^  ucx +(viable|not viable) +.+' <<<"$out" || fail "ucx line (from the backend registry) missing: $out"
grep -Eq '^group backends \(TICTAC_BACKENDS="tcp"\): tcp$' <<<"$out" || fail "no group backend choice: $out"
out=$(TICTAC_BACKENDS=verbs,tcp "$tictac" info 2>/dev/null) || fail "info with TICTAC_BACKENDS exited $?"
grep -Eq '^group backends \(TICTAC_BACKENDS="verbs,tcp"\): (verbs,)?tcp$' <<<"$out" || fail "TICTAC_BACKENDS choice not shown: $out"

secret=abcdefghijklmnop-very-secret
out=$(TICTAC_AUTH_TOKEN=$secret TICTAC_WINDOW=8 "$tictac" info --tunables) || fail "info --tunables exited $?"
grep -q "$secret" <<<"$out" && fail "the auth token was printed"
grep -Eq 'TICTAC_AUTH_TOKEN .*\[set\]$' <<<"$out" || fail "token not marked as set"
grep -Eq 'TICTAC_WINDOW .*\[set: 8\]' <<<"$out" || fail "TICTAC_WINDOW value not shown"
grep -q 'TICTAC_CHUNK_BYTES' <<<"$out" || fail "transport tunables missing"

"$tictac" info --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown flag must exit 2"
echo "info_test: all checks passed"
