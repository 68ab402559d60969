#!/bin/sh
# The Wine rig's sshd ForceCommand (tests/support/wine_sshd.rs writes the real paths for @RIG@ and @PREFIX@):
# every command a client sends runs through Wine's cmd.exe, as on a Windows node whose OpenSSH default shell is
# cmd.exe; the sftp subsystem goes to sftp-wrapper. When
# @RIG@/cut-before-agent exists, a command naming wmrender-node kills the session instead of running (a connection
# cut between push and apply), once. A restart (`shutdown.exe /r`, which Wine's shutdown.exe does not do) is
# recorded in @RIG@/reboot-requested, and the test restarts the Wine machine as Windows would (Wine::reboot); until
# it removes @RIG@/rebooting, commands wait (bounded), as a host that is down answers nothing.
export WINEPREFIX='@PREFIX@' WINEDEBUG=-all WINEDLLOVERRIDES='mscoree,mshtml='
unset DISPLAY
case "$SSH_ORIGINAL_COMMAND" in
  '@RIG@/sftp-wrapper') exec '@RIG@/sftp-wrapper' ;;
  '') echo "the Wine rig runs commands only, no interactive shell" >&2; exit 1 ;;
  shutdown.exe\ /r\ *) touch '@RIG@/rebooting'; date +%s > '@RIG@/reboot-requested'; exit 0 ;;
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
n=0
while [ -e '@RIG@/rebooting' ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n + 1)); done
exec wine 'C:\wine-fakes\ssh-exec.exe'
