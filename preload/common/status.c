/* status.c: messages and names of dh_status_t, generated from DH_STATUS_LIST. */
#include "common/status.h"

#include "common/log.h"

static const char *const dh__status_msg[] = {
#define DH__STATUS_MSG(name, msg) msg,
    DH_STATUS_LIST(DH__STATUS_MSG)
#undef DH__STATUS_MSG
};

static const char *const dh__status_names[] = {
#define DH__STATUS_STR(name, msg) #name,
    DH_STATUS_LIST(DH__STATUS_STR)
#undef DH__STATUS_STR
};

const char *dh_strerror(dh_status_t st)
{
    if ((unsigned)st >= DH_STATUS_COUNT)
        return "unknown status";
    return dh__status_msg[st];
}

const char *dh_status_name(dh_status_t st)
{
    if ((unsigned)st >= DH_STATUS_COUNT)
        return "DH_STATUS_UNKNOWN";
    return dh__status_names[st];
}

void dh__status_trace(const char *file, int line, dh_status_t st)
{
    DH_DEBUG(CORE, "%s:%d -> %s", file, line, dh_status_name(st));
}
