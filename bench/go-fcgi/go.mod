module fastcgi-bench/go-fcgi

go 1.19
