/* breaks.c: parses DHELIX_TEST_BREAK once (see breaks.h). */
#include <pthread.h>
#include <string.h>

#include "breaks.h"
#include "common/config.h"
#include "common/log.h"

static const char *const dh__break_names[] = {
#define DH__BREAK_NAME(id, name, what) name,
    DH_BREAK_LIST(DH__BREAK_NAME)
#undef DH__BREAK_NAME
};

static int dh__broken[DH_BREAK_COUNT];
static pthread_once_t dh__break_once = PTHREAD_ONCE_INIT;

static void dh__break_parse(void)
{
    const char *list = dh_config()->test_break;
    while (list && *list) {
        size_t n = strcspn(list, ",");
        int known = 0;
        for (int i = 0; i < DH_BREAK_COUNT; i++) {
            if (strlen(dh__break_names[i]) == n && !strncmp(list, dh__break_names[i], n)) {
                dh__broken[i] = known = 1;
                DH_WARN(CORE, "DHELIX_TEST_BREAK: rule %s is off (test only)", dh__break_names[i]);
            }
        }
        if (!known && n)
            DH_WARN(CORE, "DHELIX_TEST_BREAK: unknown rule \"%.*s\" ignored", (int)n, list);
        list += n + (list[n] == ',');
    }
}

int dh_break(dh_break_id_t id)
{
    pthread_once(&dh__break_once, dh__break_parse);
    return id < DH_BREAK_COUNT && dh__broken[id];
}
