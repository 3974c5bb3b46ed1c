/* SPDX-License-Identifier: MIT */
/* eb-keygen --user: a user's [user] section as a drop-in of the broker's configuration, beside
 * the key it names, so that each guest of a fleet has its own key and removing its file revokes
 * it alone. */
#pragma once

/* The administrator's drop-ins, which eb-brokerd.conf(5) reads after the package's, and the
 * usual place of the users' keys. */
#define KEYGEN_CONF_DIR "/etc/entropy-broker/eb-brokerd.conf.d"
#define KEYGEN_KEY_DIR  "/etc/entropy-broker/keys"

/* dir/user-NAME.conf's path into *ret (malloc'd); -ENOMEM. */
int keygen_user_dropin_path(const char *dir, const char *name, char **ret);

/* Creates dir/user-NAME.conf, never over an existing file, holding "[user NAME]", "role =
 * roles" and "key-file = key_path", synced with its directory. The directory is made (0755) if
 * missing, its parent must exist. -EEXIST when the file exists. */
int keygen_user_dropin_write(const char *dir, const char *name, const char *roles,
                             const char *key_path);
