#!/usr/bin/env bash
# Runs torchrun with its default (static) rendezvous on a free port of
# 127.0.0.1: torchrun's agent serves its own store on MASTER_PORT, so rank 0
# of llmc-run takes the next port. The --redirects/--tee mappings name no
# local rank below 9; Debian 12's torchrun (torch 1.13 on Python 3.11) fails
# on their default "0" (see README.md, "Several ranks").
#   torchrun_static.sh <torchrun> <nproc> -- <command> <args>...
set -u
torchrun=$1; nproc=$2; shift 2
[[ $1 == -- ]] && shift
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
exec "$torchrun" --nproc_per_node "$nproc" --master_addr 127.0.0.1 --master_port "$port" \
  --redirects 9:1 --tee 9:1 --no_python "$@"
