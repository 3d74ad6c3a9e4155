// Placeholder so the library is never empty; removed once the folder has real sources.
