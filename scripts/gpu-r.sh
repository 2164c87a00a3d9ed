#!/usr/bin/env bash
# R on the GPU box (no R there, no registry): Debian's R 4.2 unpacked under /opt/r, following
# ../shared/device/r-on-gpu-box.sh. Two device calls, because R's .debs (~52 MB) and the rfuse
# bundle (~44 MB) do not fit one 64 MiB carry:
#   here:  mkdir -p .rdeb && (cd .rdeb && apt-get download r-base-core r-cran-rcpp libicu72 \
#            libblas3 liblapack3 libgfortran5 libreadline8 libtirpc3 r-cran-testthat <its deps>)
#   call 1 (carry .rdeb):   bash scripts/gpu-r.sh unpack
#   call 2 (carry .bundle, same warm machine): bash scripts/gpu-r.sh run
set -uo pipefail
mode="${1:-run}"
RHOME=/opt/r/usr/lib/R
if [ "$mode" = unpack ]; then
  mkdir -p /opt/r && for f in .rdeb/*.deb; do dpkg -x "$f" /opt/r; done
  for f in /opt/r/etc/R/*; do ln -sf "$f" "$RHOME/etc/$(basename "$f")"; done
  rm -f "$RHOME/etc/Renviron"; cp "$RHOME/etc/Renviron.ucf" "$RHOME/etc/Renviron"
  sed -i "s#^R_HOME_DIR=.*#R_HOME_DIR=$RHOME#" "$RHOME/bin/R"
  sed -i "s#/usr/share/R/#/opt/r/usr/share/R/#g; s#/usr/lib/R/#$RHOME/#g" "$RHOME/bin/R" "$RHOME/etc/Renviron"
  echo "unpacked R into /opt/r"; exit 0
fi
export LD_LIBRARY_PATH=/opt/r/lib/x86_64-linux-gnu:/opt/r/usr/lib/x86_64-linux-gnu:/opt/r/usr/lib/x86_64-linux-gnu/blas:/opt/r/usr/lib/x86_64-linux-gnu/lapack:$RHOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export R_LIBS_USER=/opt/r/site-library R_LIBS=/opt/r/usr/lib/R/site-library:/opt/r/usr/lib/R/library
export RHOME RBIN=$RHOME/bin PATH=$RHOME/bin:$PATH
mkdir -p "$R_LIBS_USER" /tmp/rfuse-gpu
"$RBIN/R" --version | head -1 || { echo "R is not unpacked on this machine (run 'unpack' first)"; exit 1; }
tar -C /tmp/rfuse-gpu -xJf .bundle/rfuse-gpu.tar.xz
export LD_LIBRARY_PATH=/tmp/rfuse-gpu/rfuse/lib:$LD_LIBRARY_PATH RFUSE_SRC=$PWD RFUSE_BUILD=/tmp/rfuse-gpu/rfuse
"$RBIN/R" CMD INSTALL -l "$R_LIBS_USER" rbindings > /tmp/r-install.log 2>&1 || { tail -30 /tmp/r-install.log; exit 1; }
echo "== rf_default_device()"
"$RBIN/Rscript" -e 'library(rfuse); d <- rf_default_device(); cat(d, attr(d, "description"), "\n")'
echo "== examples/demo.R on the GPU"
"$RBIN/Rscript" examples/demo.R 2>&1 | grep -vE "^ {5}" | tail -n 40
echo "== testthat on the GPU"
(cd rbindings/tests && "$RBIN/Rscript" testthat.R 2>&1 | tail -n 15)
