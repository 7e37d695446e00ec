module fastcgi-reliability/loadgen

go 1.19
