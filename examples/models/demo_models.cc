// PLACEHOLDER: the demo models are being written.
#include "models/demo_models.h"
