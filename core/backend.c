#include "backend.h"

#include <stdlib.h>

void backend_destroy(struct backend *b)
{
	if (!b)
		return;
	if (b->ops && b->ops->destroy)
		b->ops->destroy(b->ctx);
	free(b);
}
