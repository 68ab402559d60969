# Rendered by wmrender: a step of wmrender-node. Makes sure the Windows Containers feature is enabled, which
# containerd needs. Enabling it takes a reboot: the result line says so and the agent waits for it.
# Prints one JSON line: {"ok":…,"rebootRequired":…} or {"ok":false,"error":…}. Edit the inputs, not this file.
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
try {
    $feature = Get-WindowsOptionalFeature -Online -FeatureName Containers
    $reboot = $false
    if ($feature.State -eq 'EnablePending') {
        $reboot = $true
    }
    elseif ($feature.State -ne 'Enabled') {
        $answer = Enable-WindowsOptionalFeature -Online -FeatureName Containers -All -NoRestart
        $reboot = [bool]$answer.RestartNeeded
    }
    Write-Output (@{ ok = $true; rebootRequired = $reboot } | ConvertTo-Json -Compress)
}
catch {
    Write-Output (@{ ok = $false; error = $_.Exception.Message } | ConvertTo-Json -Compress)
    exit 1
}
