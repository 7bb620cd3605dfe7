#!/usr/bin/env bash
# Source this on the GPU machine, from the repository root, before running Megatron-LM's training code
# from the megatron-core 0.19.0 wheel (carried in .whl/). Installs the wheel into $SITE (default /tmp/site)
# and exports PYTHONPATH. Used by tools/record_compare_family.sh and tools/record_memory_calibration.py.
SITE=${SITE:-/tmp/site}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" .whl/megatron_core-0.19.0-*.whl || return 1
# The wheel ships the prebuilt helpers_cpp extension but not the Makefile that Megatron-LM's
# _compile_dependencies() runs `make -C` on; this one only (re)builds the extension if it is stale.
DS="$SITE/megatron/core/datasets"
cat > "$DS/Makefile" <<'MAKEFILE'
CXXFLAGS += -O3 -Wall -shared -std=c++11 -fPIC -fdiagnostics-color
CPPFLAGS += $(shell python3 -m pybind11 --includes)
LIBNAME = helpers_cpp
LIBEXT = $(shell python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
OUT = $(LIBNAME)$(LIBEXT)
SRC = helpers.cpp
default: $(OUT)
$(OUT): $(SRC)
	$(CXX) $(CXXFLAGS) $(CPPFLAGS) $< -o $@
MAKEFILE
touch "$DS"/helpers_cpp*.so
export SITE PYTHONPATH=$SITE PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1
