# Rendered by wmrender: a step of wmrender-node, run after every boot. Restores the routes to the EC2 link-local
# services that a reboot of a node with container networking can lose, as the EC2 launch agent sets them:
# instance metadata, KMS (Windows activation) and the time service. Prints one JSON line. Edit the inputs, not
# this file.
$ErrorActionPreference = 'Stop'
try {
    $route = Get-NetRoute -DestinationPrefix '0.0.0.0/0' | Sort-Object -Property RouteMetric | Select-Object -First 1
    $added = @()
    foreach ($prefix in @('169.254.169.254/32', '169.254.169.250/32', '169.254.169.251/32', '169.254.169.123/32')) {
        if (-not (Get-NetRoute -DestinationPrefix $prefix -ErrorAction SilentlyContinue)) {
            New-NetRoute -DestinationPrefix $prefix -InterfaceIndex $route.ifIndex -NextHop $route.NextHop | Out-Null
            $added += $prefix
        }
    }
    Write-Output (@{ ok = $true; value = ($added -join ',') } | ConvertTo-Json -Compress)
}
catch {
    Write-Output (@{ ok = $false; error = $_.Exception.Message } | ConvertTo-Json -Compress)
    exit 1
}
