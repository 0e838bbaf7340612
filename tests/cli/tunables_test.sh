#!/usr/bin/env bash
# `tictac info --tunables` lists every TICTAC_* variable that the docs name and that the Python
# packages and the framework plugins read (those not linked into the CLI are registered by
# cli/external_tunables.cc), each with a default. Names that are not environment tunables are
# listed below with the reason; a new variable must be added to the CLI's list or here.
set -u
tictac=$1
root=$2
fail() { echo "FAIL: $*"; exit 1; }

not_tunables=(
  TICTAC_CHECK TICTAC_RETURN_IF_ERROR TICTAC_LOG TICTAC_VERSION  # C++ macros named in the docs
  TICTAC_SERVER                                                  # the TF ServerFactory's name
  TICTAC_UCX_SPIN                                                # removed; docs/ucx.md says so
  TICTAC_EXPECT_TF TICTAC_EXPECT_TORCH TICTAC_TEST_VERBS_GID_INDEX  # test harness switches
  TICTAC_TF_PROBE_BUILD TICTAC_TF_VENV TICTAC_TF_VERSION TICTAC_TORCH_PYTHON  # build/test scripts
  TICTAC_EMU_PROFILE TICTAC_EMU_SCALE TICTAC_EMU_CLOCK           # bench/e2e columns, not variables read
)

out=$("$tictac" info --tunables) || fail "info --tunables exited $?"
listed=$(grep -oE '^  TICTAC_[A-Z0-9_]+ +default +[^ ]' <<<"$out" | awk '{print $1}' | sort -u)
[ -n "$listed" ] || fail "no tunables listed: $out"
named=$({
  grep -hoE 'TICTAC_[A-Z0-9_]+' "$root"/docs/*.md "$root"/README.md
  grep -rhoE 'TICTAC_[A-Z0-9_]+' "$root"/python/tictac "$root"/integration --include='*.py' --include='*.cc' --include='*.h'
} | grep -v '_$' | sort -u)
missing=()
for name in $named; do
  grep -qx "$name" <<<"$listed" && continue
  printf '%s\n' "${not_tunables[@]}" | grep -qx "$name" && continue
  missing+=("$name")
done
[ ${#missing[@]} -eq 0 ] || fail "named in docs/ or read by python/, integration/ but not in 'tictac info --tunables': ${missing[*]} (register it: common/tunables.h beside its reader, or cli/external_tunables.cc)"
for name in TICTAC_BACKENDS TICTAC_RING_CHUNK_BYTES TICTAC_PS_UPDATE TICTAC_TF_POLICY; do
  grep -Eq "^  $name +default +[^ ]+" <<<"$out" || fail "$name listed without a default"
done
echo "tunables_test: $(wc -l <<<"$listed") tunables listed; every named one is among them"
