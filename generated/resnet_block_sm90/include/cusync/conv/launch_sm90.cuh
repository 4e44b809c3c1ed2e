// cusync conv backend: a stage unit's includes on sm90, the Hopper kernel and the launch of one conv stage.
#pragma once

#include "cusync/conv/conv_sm90.cuh"
#include "cusync/conv/launch.cuh"
