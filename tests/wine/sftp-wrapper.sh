#!/bin/sh
# The Wine rig's sftp subsystem (tests/support/wine_sshd.rs writes the real paths for @RIG@ and @PREFIX@): sftp
# with Windows-style paths, as Win32-OpenSSH serves them: /C:/k/x is drive_c/k/x of the prefix. A private mount
# namespace holds a tmpfs root with the system folders and the prefix's drive_c bind-mounted as /C:, and
# sftp-server runs chrooted there (sshd's ChrootDirectory cannot be used below /tmp: it wants root-owned,
# non-writable path components).
exec unshare --mount --propagation private sh -ec '
R=@RIG@/sftproot
mount -t tmpfs tmpfs "$R"
for d in usr lib lib64 bin etc; do [ -e /$d ] && mkdir -p "$R/$d" && mount --rbind /$d "$R/$d"; done
mkdir -p "$R/C:" && mount --bind "@PREFIX@/drive_c" "$R/C:"
mkdir -p "$R/dev" && touch "$R/dev/null" && mount --bind /dev/null "$R/dev/null"
exec chroot "$R" /usr/lib/openssh/sftp-server -d /C:
'
