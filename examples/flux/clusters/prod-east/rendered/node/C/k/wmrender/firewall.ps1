# Rendered by wmrender: a step of wmrender-node. Opens the ports the cluster reaches the node on: kubelet (logs,
# exec) and windows_exporter (metrics), as WMCO's user data does. Prints one JSON line. Edit the inputs, not this file.
$ErrorActionPreference = 'Stop'
try {
    $rules = @(
        @{ Name = 'ContainerLogsPort'; Port = 10250 },
        @{ Name = 'WindowsExporter'; Port = 9182 }
    )
    foreach ($rule in $rules) {
        if (-not (Get-NetFirewallRule -Name $rule.Name -ErrorAction SilentlyContinue)) {
            New-NetFirewallRule -Name $rule.Name -DisplayName $rule.Name -Direction Inbound -Protocol TCP `
                -LocalPort $rule.Port -Action Allow -EdgeTraversalPolicy Allow | Out-Null
        }
    }
    Write-Output (@{ ok = $true } | ConvertTo-Json -Compress)
}
catch {
    Write-Output (@{ ok = $false; error = $_.Exception.Message } | ConvertTo-Json -Compress)
    exit 1
}
