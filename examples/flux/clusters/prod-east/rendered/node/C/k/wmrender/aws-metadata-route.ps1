# Rendered by wmrender: restores the route to the EC2 instance metadata service, which a reboot of a node with
# container networking can lose (AWS's documented fix for Windows nodes).
$ErrorActionPreference = 'Stop'
if (-not (Get-NetRoute -DestinationPrefix '169.254.169.254/32' -ErrorAction SilentlyContinue)) {
    $route = Get-NetRoute -DestinationPrefix '0.0.0.0/0' | Sort-Object -Property RouteMetric | Select-Object -First 1
    New-NetRoute -DestinationPrefix '169.254.169.254/32' -InterfaceIndex $route.ifIndex -NextHop $route.NextHop | Out-Null
}
