/* version.c: the only file that sees DH_VERSION_STRING, so a version change rebuilds one
 * object. */
#include "common/status.h"

#ifndef DH_VERSION_STRING
#error "DH_VERSION_STRING must be defined by the build"
#endif

const char *dh_version(void)
{
    return DH_VERSION_STRING;
}
