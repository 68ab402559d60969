# Rendered by wmrender: a step of wmrender-node. The EC2 instance's private DNS name (IMDSv1, which the
# MachineSets allow), which names the node. Prints one JSON line with the name as "value". Edit the inputs, not
# this file.
$ErrorActionPreference = 'Stop'
try {
    $name = [string](Invoke-RestMethod -UseBasicParsing -TimeoutSec 10 `
        -Uri 'http://169.254.169.254/latest/meta-data/local-hostname')
    Write-Output (@{ ok = $true; value = $name } | ConvertTo-Json -Compress)
}
catch {
    Write-Output (@{ ok = $false; error = $_.Exception.Message } | ConvertTo-Json -Compress)
    exit 1
}
