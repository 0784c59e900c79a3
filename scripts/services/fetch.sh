#!/usr/bin/env bash
# fetch.sh PROFILE...: resolves the jars of pom.xml's profiles (kafka, connect, debezium-postgres;
# all when none is named) from Maven Central into ~/.cache/lakecdc/services/<profile>/
# (Connect plugins: plugins/<profile>/).
# A profile is fetched once: again only when its part of pom.xml (or the versions) changes.
source "$(dirname "$0")/lib.sh"

profiles=("$@")
((${#profiles[@]})) || profiles=(kafka connect debezium-postgres)
for p in "${profiles[@]}"; do
  grep -q "<id>$p</id>" "$SERVICES_HOME/pom.xml" || die "pom.xml has no profile $p"
  dest="$(profile_dir "$p")"
  stamp="$(sed -n -e '/<properties>/,/<\/properties>/p' -e "/<id>$p<\/id>/,/<\/profile>/p" "$SERVICES_HOME/pom.xml" \
    | sha256sum | cut -c1-16)"
  [[ -f $dest/.fetched && $(cat "$dest/.fetched") == "$stamp" ]] && continue
  echo "fetching $p into $dest" >&2
  rm -rf "$dest.tmp" && mkdir -p "$(dirname "$dest")"
  mvn -q -B -Dstyle.color=never -f "$SERVICES_HOME/pom.xml" -P "$p" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dest.tmp" >"$dest.log" 2>&1 \
    || { cat "$dest.log" >&2; die "could not fetch $p (Maven's output above)"; }
  rm -f "$dest.log"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  echo "$stamp" >"$dest/.fetched"
done
