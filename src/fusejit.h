// The public umbrella header of the fusejit library.
#pragma once

#include "fusejit_version.h"
#include "ir/builder.h"
#include "ir/composites.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "ir/op_table.h"
#include "ir/philox.h"
#include "ir/shape.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
