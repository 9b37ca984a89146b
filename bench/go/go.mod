module local

go 1.19
