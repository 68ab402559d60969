# Rendered by wmrender: keeps Windows Defender from scanning a binary's processes, if Defender runs.
param(
    [Parameter(Mandatory = $true)]
    [string]$BinPath
)
$ErrorActionPreference = 'Stop'
if (Get-Process -Name 'MsMpEng' -ErrorAction SilentlyContinue) {
    $excluded = @((Get-MpPreference).ExclusionProcess)
    if ($excluded -notcontains $BinPath) {
        Add-MpPreference -ExclusionProcess $BinPath
    }
}
