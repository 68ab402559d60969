# Rendered by wmrender: a step of wmrender-node. Keeps Windows Defender from scanning a binary's processes, if
# Defender runs (WMCO's windows-defender-exclusion.ps1). Prints one JSON line. Edit the inputs, not this file.
param(
    [Parameter(Mandatory = $true)]
    [string]$BinPath
)
$ErrorActionPreference = 'Stop'
try {
    if (Get-Process -Name 'MsMpEng' -ErrorAction SilentlyContinue) {
        $excluded = @((Get-MpPreference).ExclusionProcess)
        if ($excluded -notcontains $BinPath) {
            Add-MpPreference -ExclusionProcess $BinPath
        }
    }
    Write-Output (@{ ok = $true } | ConvertTo-Json -Compress)
}
catch {
    Write-Output (@{ ok = $false; error = $_.Exception.Message } | ConvertTo-Json -Compress)
    exit 1
}
