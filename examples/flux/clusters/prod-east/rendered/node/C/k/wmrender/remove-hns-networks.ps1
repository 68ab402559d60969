# Rendered by wmrender: the step `wmrender-node deconfigure` runs after it stopped the node's services. Removes the
# HNS networks hybrid-overlay-node created, as WMCO does when it deconfigures a node (the overlay network first,
# then the base network; Windows drops their endpoints with them). Prints one JSON line: {"ok":true} (also when
# none is there: running it again is harmless) or {"ok":false,"error":…}. Edit the inputs, not this file.
$ErrorActionPreference = 'Stop'

function Write-StepResult {
    param([hashtable]$Result, [int]$Code)
    Write-Output ($Result | ConvertTo-Json -Compress)
    exit $Code
}

trap {
    Write-StepResult @{ ok = $false; error = $_.Exception.Message } 1
}

Import-Module -DisableNameChecking 'C:\k\hns.psm1'
$names = @(
    'OVNKubernetesHybridOverlayNetwork',
    'BaseOVNKubernetesHybridOverlayNetwork'
)
foreach ($name in $names) {
    $network = Get-HnsNetwork | Where-Object { $_.Name -eq $name }
    if ($network) {
        $network | Remove-HnsNetwork
    }
}
Write-StepResult @{ ok = $true } 0
