# SPDX-License-Identifier: BSD-3-Clause
# bash completion for hugepool, hugepool-run, hugepool-reserve and
# hugepool-stats, installed once per command under
# share/bash-completion/completions (bash-completion loads it on first use;
# `source` it by hand elsewhere).  Option names come from each program's own
# --help, so a new option completes without an edit here; the values of the
# options that take a word are listed below, as the programs accept them.

# The options a --help text lists: on its usage lines and on the lines that
# start with an option.
_hugepool_options_of() {
  "$@" --help 2>&1 | grep -E '^ {0,8}-|^usage:|^ +hugepool' |
    grep -oE '(^|[][ |,])--?[a-zA-Z][-a-zA-Z]*' | tr -d '][ |,' | sort -u
}

# Values of an option that takes a word; "" for a free value (a size, a
# path); nothing printed when the option takes none.
_hugepool_values() {
  case $1 in
    -p | --policy) echo "strict thp small fallback" ;;
    --page-size | --size) echo "2M 1G" ;;
    --fork) echo "copy keep" ;;
    --hold) echo "auto all share" ;;
    --mpi) echo "auto off" ;;
    --cuda) echo "0 1 all" ;;
    --stats) echo "text json" ;;
    -t | --threshold | -o | --stats-file | --cache-slots | --cache-bytes | --need | --ranks | --root | --node | --png) echo "" ;;
    *) return 1 ;;
  esac
}

_hugepool_complete() {
  local cmd=${COMP_WORDS[0]##*/} cur=${COMP_WORDS[COMP_CWORD]} prev=""
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  COMPREPLY=()
  local i
  # hugepool-run: after `--` or the first word that is no option, the
  # program, then the program's own arguments.
  if [[ $cmd == hugepool-run ]]; then
    local prog=0
    for ((i = 1; i < COMP_CWORD; i++)); do
      local w=${COMP_WORDS[i]}
      if [[ $w == -- ]]; then
        prog=$((i + 1))
        break
      elif [[ $w == -* ]]; then
        # An option whose value is the next word (--stats and --cuda take
        # theirs joined by '=' only).
        [[ $w != *=* && $w != --stats && $w != --cuda ]] && _hugepool_values "$w" >/dev/null && i=$((i + 1))
      else
        prog=$i
        break
      fi
    done
    if ((prog)); then
      if ((COMP_CWORD == prog)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
      else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      fi
      return 0
    fi
  fi
  # --opt=VALUE
  if [[ $cur == --*=* ]]; then
    local opt=${cur%%=*} vals
    vals=$(_hugepool_values "$opt") || return 0
    if [[ -n $vals ]]; then
      mapfile -t COMPREPLY < <(compgen -P "$opt=" -W "$vals" -- "${cur#*=}")
    else
      mapfile -t COMPREPLY < <(compgen -P "$opt=" -f -- "${cur#*=}")
    fi
    return 0
  fi
  local vals
  if vals=$(_hugepool_values "$prev") && ! { [[ $cmd == hugepool-run && ($prev == --stats || $prev == --cuda) ]]; }; then
    if [[ -n $vals ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$vals" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
  fi
  local -a help=("${COMP_WORDS[0]}")
  if [[ $cmd == hugepool ]]; then
    # hugepool COMMAND [options]: the command first, then its options.
    local sub=""
    for ((i = 1; i < COMP_CWORD; i++)); do
      [[ ${COMP_WORDS[i]} != -* ]] && { sub=${COMP_WORDS[i]}; break; }
    done
    if [[ -z $sub ]]; then
      [[ $cur == -* ]] && mapfile -t COMPREPLY < <(compgen -W "--help --version" -- "$cur") ||
        mapfile -t COMPREPLY < <(compgen -W "doctor stats" -- "$cur")
      return 0
    fi
    help+=("$sub")
    [[ $sub == stats && $cur != -* ]] && { mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return 0; }
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_hugepool_options_of "${help[@]}")" -- "$cur")
  elif [[ $cmd == hugepool-stats ]]; then
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  elif [[ $cmd == hugepool-run ]]; then
    mapfile -t COMPREPLY < <(compgen -c -- "$cur")
  fi
  return 0
}
complete -o default -F _hugepool_complete hugepool hugepool-run hugepool-reserve hugepool-stats
