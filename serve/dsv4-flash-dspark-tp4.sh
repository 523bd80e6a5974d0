#!/bin/bash -p
# Privileged mode (-p), before the first line runs: no BASH_ENV or ENV file, no function from the
# environment, SHELLOPTS, BASHOPTS, CDPATH and GLOBIGNORE ignored. `bash FILE` loses the -p (and
# has run BASH_ENV already: launch it as ./FILE or `bash -p FILE`); the functions and options it
# took go, as it runs again with -p (POSIX mode first: `exec` is the builtin, never a function).
case $- in *p*) ;; *) POSIXLY_CORRECT=1 && exec "$BASH" -p -- "$0" "$@" ;; esac
# What bash takes from the environment even so (seatkit/seat/what_runs.yaml):
unset TMOUT FUNCNEST BASH_COMPAT EXECIGNORE POSIXLY_CORRECT
# dsv4-flash-dspark-tp4: DeepSeek-V4-Flash + DSpark (k=5, probabilistic drafts) on the b12x vLLM fork, TP=4, 4x RTX PRO 6000 on PCIe
# Rendered by `seat render` from profiles/dsv4-flash-dspark-tp4.yaml (profile sha256 0400271669c2fee8).
# Do not edit: change the profile and run `seat render`. Needs bash and docker only.
# `seat up` compares its own launch with the one this script was rendered from:
# Launch sha256 f962a1b17a61cc5aecdf1947b2c98b69ad971120c587a10f6a28913c23ca4fd1
#
# Host knobs, read from the environment (the profile's value when unset):
#   SEAT_IMAGE             image the seat runs (`seat build` makes it)
#   SEAT_CONTAINER         container name
#   SEAT_HOST              address the server binds
#   SEAT_PORT              port the server listens on
#   SEAT_MODEL_BASE_DIR    host directory of the base model
#   SEAT_MODEL_DRAFT_DIR   host directory of the draft model
#   SEAT_CACHE_DIR         persistent JIT cache (one per image and profile)
#   SEAT_NSYS              Nsight Systems: off, profile (nsys profile from the start) or session (nsys launch; `seat bench --nsys` collects); compose: start service seat-nsys-profile or seat-nsys-session instead
#   SEAT_NSYS_SESSION      nsys session name (session mode)
#   SEAT_NSYS_GRAPH_TRACE  nsys --cuda-graph-trace: node (each kernel) or graph (whole graphs)
#   SEAT_NSYS_OUTPUT       nsys output path inside the container, under the cache volume
#   SEAT_NSYS_DURATION     seconds nsys profile collects (profile mode)
#   SEAT_SKIP_PREFLIGHT=1   skip the checks before the launch
#   SEAT_DRY_RUN=1          print the launch command and exit (preflight findings are warnings)
#   SEAT_EXPOSE_WITHOUT_KEY=1  allow a non-loopback SEAT_HOST without an API key
set -euo pipefail

[ -n "${SEAT_IMAGE+set}" ] || SEAT_IMAGE=seatkit/dsv4-flash-dspark-tp4:overlay-731bbcb90b64-c8c8a5086e40
[ -n "${SEAT_CONTAINER+set}" ] || SEAT_CONTAINER=dsv4-flash-dspark
[ -n "${SEAT_HOST+set}" ] || SEAT_HOST=127.0.0.1
[ -n "${SEAT_PORT+set}" ] || SEAT_PORT=9406
[ -n "${SEAT_MODEL_BASE_DIR+set}" ] || SEAT_MODEL_BASE_DIR=/srv/models/deepseek-v4-flash-official
[ -n "${SEAT_MODEL_DRAFT_DIR+set}" ] || SEAT_MODEL_DRAFT_DIR=/srv/models/DeepSeek-V4-Flash-DSpark
[ -n "${SEAT_CACHE_DIR+set}" ] || SEAT_CACHE_DIR=/var/cache/seatkit/dsv4-flash-dspark-tp4
[ -n "${SEAT_NSYS+set}" ] || SEAT_NSYS=off
[ -n "${SEAT_NSYS_SESSION+set}" ] || SEAT_NSYS_SESSION=dsv4_flash_dspark_tp4_decode
[ -n "${SEAT_NSYS_GRAPH_TRACE+set}" ] || SEAT_NSYS_GRAPH_TRACE=node
[ -n "${SEAT_NSYS_OUTPUT+set}" ] || SEAT_NSYS_OUTPUT=/cache/nsys/dsv4-flash-dspark-tp4
[ -n "${SEAT_NSYS_DURATION+set}" ] || SEAT_NSYS_DURATION=240

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
  case "$SEAT_CONTAINER" in
    dsv4-9200-prod) fail "container name $SEAT_CONTAINER is reserved by this profile" "set SEAT_CONTAINER" ;;
  esac
  if docker container inspect "$SEAT_CONTAINER" >/dev/null 2>&1; then
    fail "a container named $SEAT_CONTAINER already exists" "seat down dsv4-flash-dspark-tp4, or docker rm it"
  fi
  if ! command -v docker >/dev/null; then
    fail "no docker command on this machine" "install docker"
  elif ! docker info >/dev/null 2>&1; then
    fail "no docker engine answers (docker info failed)" "start dockerd (or the docker service), or set DOCKER_HOST to the engine's socket; then retry"
  elif ! docker image inspect "$SEAT_IMAGE" >/dev/null 2>&1; then
    case "$SEAT_IMAGE" in
      seatkit/*) hint="a local tag, nothing to pull: seat build dsv4-flash-dspark-tp4 makes it" ;;
      *) hint="docker pull it" ;;
    esac
    fail "image $SEAT_IMAGE is not on this machine (or its digest differs)" "$hint"
  fi
  case "${SEAT_IMAGE}" in
    *@sha256:*) ;;
    *) printf 'seat preflight: warning: %s is not pinned by digest\n' "${SEAT_IMAGE}" >&2 ;;
  esac
  case "$SEAT_PORT" in
    9200) fail "port $SEAT_PORT is reserved by this profile" "pick another SEAT_PORT" ;;
  esac
  if (exec 3<>"/dev/tcp/$SEAT_HOST/$SEAT_PORT") 2>/dev/null; then
    fail "something already listens on $SEAT_HOST:$SEAT_PORT" "stop it, or set SEAT_PORT"
  fi
  dir="${SEAT_MODEL_BASE_DIR}"
  [ -d "$dir" ] || fail 'base model'" directory not found: $dir" 'seat model fetch dsv4-flash-dspark-tp4 downloads it, or set SEAT_MODEL_BASE_DIR to the folder that has it'
  case "$dir" in
    *:*|*,*) fail 'base model'" directory has ':' or ',', which docker mounts cannot take: $dir" ;;
    [!/]*) fail 'base model'" directory must be an absolute path to be mounted: $dir" 'seat model fetch dsv4-flash-dspark-tp4 downloads it, or set SEAT_MODEL_BASE_DIR to the folder that has it' ;;
  esac
  file="${SEAT_MODEL_BASE_DIR}"/config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model config.json'" is missing or empty: $file"
  file="${SEAT_MODEL_BASE_DIR}"/model.safetensors.index.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model model.safetensors.index.json'" is missing or empty: $file"
  file="${SEAT_MODEL_BASE_DIR}"/tokenizer.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model tokenizer.json'" is missing or empty: $file"
  file="${SEAT_MODEL_BASE_DIR}"/tokenizer_config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_BASE_DIR}" ] || [ -s "$file" ] || fail 'base model tokenizer_config.json'" is missing or empty: $file"
  index="${SEAT_MODEL_BASE_DIR}"/model.safetensors.index.json
  if [ -d "${index%/*}" ]; then
  shards=0
  # One shard name a line: never word-split or globbed.
  while IFS= read -r shard; do
    shards=$((shards + 1))
    [ -s "${index%/*}/$shard" ] || fail 'base model'" shard missing or empty: $shard" "the index lists it; finish the download"
  done < <(grep -o '"[^"]*\.safetensors"' "$index" 2>/dev/null | tr -d '"' | sort -u)
  [ "$shards" -gt 0 ] || fail 'base model'" index lists no shards (or is unreadable): $index"
  fi
  dir="${SEAT_MODEL_DRAFT_DIR}"
  [ -d "$dir" ] || fail 'draft model'" directory not found: $dir" 'seat model fetch dsv4-flash-dspark-tp4 downloads it, or set SEAT_MODEL_DRAFT_DIR to the folder that has it'
  case "$dir" in
    *:*|*,*) fail 'draft model'" directory has ':' or ',', which docker mounts cannot take: $dir" ;;
    [!/]*) fail 'draft model'" directory must be an absolute path to be mounted: $dir" 'seat model fetch dsv4-flash-dspark-tp4 downloads it, or set SEAT_MODEL_DRAFT_DIR to the folder that has it' ;;
  esac
  file="${SEAT_MODEL_DRAFT_DIR}"/config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_DRAFT_DIR}" ] || [ -s "$file" ] || fail 'draft model config.json'" is missing or empty: $file"
  file="${SEAT_MODEL_DRAFT_DIR}"/model.safetensors.index.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_DRAFT_DIR}" ] || [ -s "$file" ] || fail 'draft model model.safetensors.index.json'" is missing or empty: $file"
  file="${SEAT_MODEL_DRAFT_DIR}"/tokenizer.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_DRAFT_DIR}" ] || [ -s "$file" ] || fail 'draft model tokenizer.json'" is missing or empty: $file"
  file="${SEAT_MODEL_DRAFT_DIR}"/tokenizer_config.json
  # A file of a folder that is not there was said once, by the folder (a dry run goes on).
  [ ! -d "${SEAT_MODEL_DRAFT_DIR}" ] || [ -s "$file" ] || fail 'draft model tokenizer_config.json'" is missing or empty: $file"
  index="${SEAT_MODEL_DRAFT_DIR}"/model.safetensors.index.json
  if [ -d "${index%/*}" ]; then
  shards=0
  # One shard name a line: never word-split or globbed.
  while IFS= read -r shard; do
    shards=$((shards + 1))
    [ -s "${index%/*}/$shard" ] || fail 'draft model'" shard missing or empty: $shard" "the index lists it; finish the download"
  done < <(grep -o '"[^"]*\.safetensors"' "$index" 2>/dev/null | tr -d '"' | sort -u)
  [ "$shards" -gt 0 ] || fail 'draft model'" index lists no shards (or is unreadable): $index"
  fi
  dir="${SEAT_CACHE_DIR}"
  case "$dir" in
    /*:*|/*,*|[!/]*|"") fail cache" directory must be an absolute path without ':' or ',' (docker mounts take no others): '$dir'" "set SEAT_CACHE_DIR to one" ;;
  esac
  [ -d "$dir" ] || [ "${SEAT_DRY_RUN:-0}" = 1 ] || mkdir -p -- "$dir" || fail "cannot make the cache directory $dir" "make it by hand, or set SEAT_CACHE_DIR to a folder you can write"
  if ! command -v nvidia-smi >/dev/null; then
    fail "nvidia-smi not found: no NVIDIA driver on this host"
  else
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    [ "$gpus" -ge 4 ] || fail "$gpus GPUs visible, tensor parallelism needs 4"
  fi
}

# No key, no exposure: loopback only, unless the operator says otherwise.
[[ $SEAT_HOST =~ ^(127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|::1|localhost)$ ]] || [ "${SEAT_EXPOSE_WITHOUT_KEY:-0}" = 1 ] ||
  fail "refusing to serve on $SEAT_HOST without an API key" "set server.api_key: true, bind 127.0.0.1, or set SEAT_EXPOSE_WITHOUT_KEY=1"

[ "${SEAT_SKIP_PREFLIGHT:-0}" = 1 ] || preflight


cmd=(
  docker run --rm --name "$SEAT_CONTAINER"
  --gpus all --ipc host --network host --init
  --stop-timeout 120 --label seatkit.profile=dsv4-flash-dspark-tp4
  --ulimit memlock=-1
  --ulimit stack=67108864
  --ulimit nofile=1048576
  --volume "${SEAT_MODEL_BASE_DIR}":/models-base:ro
  --volume "${SEAT_MODEL_DRAFT_DIR}":/models-draft:ro
  --volume "${SEAT_CACHE_DIR}":/cache
  --env 'CUDA_VISIBLE_DEVICES=0,1,2,3'
  --env 'CUDA_DEVICE_ORDER=PCI_BUS_ID'
  --env 'CUTE_DSL_ARCH=sm_120a'
  --env 'HF_HUB_OFFLINE=1'
  --env 'XDG_CACHE_HOME=/cache/jit'
  --env 'TORCH_EXTENSIONS_DIR=/cache/jit/torch_extensions'
  --env 'TRITON_CACHE_DIR=/cache/jit/triton'
  --env 'VLLM_CACHE_DIR=/cache/jit/vllm'
  --env 'FLASHINFER_WORKSPACE_BASE=/cache/jit/flashinfer'
  --env 'B12X_CUTE_COMPILE_CACHE_DIR=/cache/jit/b12x'
  --env 'NCCL_IB_DISABLE=1'
  --env 'NCCL_P2P_LEVEL=SYS'
  --env 'NCCL_PROTO=LL,LL128,Simple'
  --env 'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True'
  --env 'VLLM_PREFIX_CACHE_RETENTION_INTERVAL=4096'
  --env 'VLLM_USE_AOT_COMPILE=1'
  --env 'VLLM_USE_BREAKABLE_CUDAGRAPH=0'
  --env 'VLLM_USE_MEGA_AOT_ARTIFACT=1'
  --env 'B12X_MHC_MAX_TOKENS=16384'
  --env 'VLLM_USE_FLASHINFER_SAMPLER=1'
  --env 'VLLM_USE_B12X_WO_PROJECTION=1'
  --env 'VLLM_USE_B12X_MHC=1'
  --env 'VLLM_USE_B12X_FP8_GEMM=1'
  --env 'VLLM_USE_B12X_MOE=1'
  --env 'VLLM_USE_B12X_SPARSE_INDEXER=1'
  --env 'VLLM_USE_V2_MODEL_RUNNER=1'
  --env 'VLLM_ENABLE_PCIE_ALLREDUCE=1'
  --env 'VLLM_PCIE_ALLREDUCE_BACKEND=b12x'
  --env 'B12X_MLA_SM120_UNIFIED=1'
  --env 'USES_B12X=True'
  --env 'B12X_W4A16_TC_DECODE=1'
  --env 'DSPARK_COMMITTED_PREFIX_KV=0'
  --env 'DSPARK_VERIFY_LEN_BUCKETS=6'
  --env 'VLLM_SPEC_DECODE_QUERY_LEN_BUCKETS=6'
  --env 'VLLM_SPEC_DECODE_BUCKET_REQ_COUNTS=1,2,4,8'
  --env 'VLLM_B12X_MLA_SPEC_EXTEND_AS_DECODE=0'
  --env 'VLLM_B12X_MLA_SPEC_DECODE_MAX_Q=8'
  --env 'B12X_DENSE_SPLITK_TURBO=0'
  --env 'B12X_DENSE_SPLITK=0'
  --env 'B12X_DENSE_SPLITK_LOSSLESS=1'
  --env 'B12X_DENSE_SPLITK_MAX=2'
  --env 'B12X_DENSE_SPLITK_WAVE=0'
  --env 'B12X_DENSE_SPLITK_WAVE_MAX=8'
  --env 'B12X_DENSE_MXFP8_SWAP_AB=0'
  --env 'B12X_DENSE_MXFP8_SWAP_TILE_N=32'
  --env "SEAT_HOST=${SEAT_HOST}"
  --env "SEAT_PORT=${SEAT_PORT}"
  --env B12X_MICRO_MAX_ACTIVE_CLUSTERS
  "$SEAT_IMAGE"
  env -u NCCL_GRAPH_FILE -u NCCL_GRAPH_DUMP_FILE -u VLLM_B12X_MLA_EXTEND_MAX_CHUNKS

  ${nsys[@]+"${nsys[@]}"}
  vllm
  serve
  /models-base
  --host "${SEAT_HOST}"
  --port "${SEAT_PORT}"
  --served-model-name deepseek-v4-flash-dspark
  --tensor-parallel-size 4
  --speculative-config '{"method":"dspark","num_speculative_tokens":5,"model":"'/models-draft'","draft_sample_method":"probabilistic","use_local_argmax_reduction":false,"dspark_confidence_schedule":false,"dspark_sts_temperatures":[1.15,1.3,1.45,1.6,1.75],"dspark_scheduler_knee_tokens":64.0,"dspark_scheduler_cost_exponent":2.0,"moe_backend":"b12x"}'
  --kv-cache-dtype fp8
  --block-size 256
  --load-format safetensors
  --moe-backend b12x
  --linear-backend b12x
  --gpu-memory-utilization 0.89
  --max-model-len 393216
  --max-num-seqs 64
  --max-num-batched-tokens 8192
  --max-cudagraph-capture-size 64
  --async-scheduling
  --no-scheduler-reserve-full-isl
  --attention-backend B12X_MLA_SPARSE
  --enable-chunked-prefill
  --enable-prefix-caching
  --compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all"]}'
  --tokenizer-mode deepseek_v4
  --tool-call-parser deepseek_v4
  --reasoning-parser deepseek_v4
  --enable-auto-tool-choice
  --default-chat-template-kwargs '{"thinking":true,"reasoning_effort":"high"}'
  --enable-flashinfer-autotune
)

printf '%s %s %s\n' 'seat dsv4-flash-dspark-tp4:' "SEAT_IMAGE=${SEAT_IMAGE} SEAT_CONTAINER=${SEAT_CONTAINER} SEAT_HOST=${SEAT_HOST} SEAT_PORT=${SEAT_PORT} SEAT_MODEL_BASE_DIR=${SEAT_MODEL_BASE_DIR} SEAT_MODEL_DRAFT_DIR=${SEAT_MODEL_DRAFT_DIR} SEAT_CACHE_DIR=${SEAT_CACHE_DIR} SEAT_NSYS=${SEAT_NSYS} SEAT_NSYS_SESSION=${SEAT_NSYS_SESSION} SEAT_NSYS_GRAPH_TRACE=${SEAT_NSYS_GRAPH_TRACE} SEAT_NSYS_OUTPUT=${SEAT_NSYS_OUTPUT} SEAT_NSYS_DURATION=${SEAT_NSYS_DURATION} B12X_MICRO_MAX_ACTIVE_CLUSTERS=${B12X_MICRO_MAX_ACTIVE_CLUSTERS-(unset)}" 'runtime=docker tp=4 served_model_name=deepseek-v4-flash-dspark speculative=dspark/k=5 vllm_args=22 env=45 extra_mounts=none extra_env=none' >&2
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
exec "${cmd[@]}"
