#!/bin/sh
# The Wine rig's sshd ForceCommand (tests/support/wine_sshd.rs writes the real paths for @RIG@ and @PREFIX@):
# every command a client sends runs through Wine's cmd.exe, as on a Windows node whose OpenSSH default shell is
# cmd.exe; the sftp subsystem goes to sftp-wrapper. When
# @RIG@/cut-before-agent exists, a command naming wmrender-node kills the session instead of running (a connection
# cut between push and apply), once.
export WINEPREFIX='@PREFIX@' WINEDEBUG=-all WINEDLLOVERRIDES='mscoree,mshtml='
unset DISPLAY
case "$SSH_ORIGINAL_COMMAND" in
  '@RIG@/sftp-wrapper') exec '@RIG@/sftp-wrapper' ;;
  '') echo "the Wine rig runs commands only, no interactive shell" >&2; exit 1 ;;
  *wmrender-node*)
    if [ -e '@RIG@/cut-before-agent' ]; then
      rm -f '@RIG@/cut-before-agent'
      # The nearest sshd above this script serves the connection: killing it cuts the connection.
      p=$PPID
      while [ "$p" -gt 1 ]; do
        case "$(cat /proc/$p/comm)" in sshd*) kill -KILL "$p"; exit 1 ;; esac
        p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2)
      done
      exit 1
    fi ;;
esac
exec wine 'C:\wine-fakes\ssh-exec.exe'
